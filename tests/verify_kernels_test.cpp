// Small-batch verify kernels (issue #10): the packed group kernels against their scalar references
// at every call width k = 1..8, on shapes whose n_out is not a multiple of the 16-row group (the tail
// rows go through the row kernels) and n_in of one or several blocks. The q4_K group kernel and its
// reference do the same integer and float operations in the same order (packed_q4k.h), so they must
// agree bit for bit; the whole matmul must agree with matmul_ref within rounding, and each token's
// outputs must not depend on k.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/matmul.h"
#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/packed_weights.h"
#include "quant/quant.h"
#include "q8k_acts.h"
#include "test_util.h"

namespace polykv {
namespace {

using cpu::Isa;

bool is_float_type(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

// n_out rows of n_in values of `type`, quantized from random floats by the reference quantizer.
std::vector<uint8_t> random_matrix(DType type, int64_t n_in, int64_t n_out, uint32_t seed) {
  const size_t rb = row_bytes(type, n_in);
  std::vector<uint8_t> m(rb * size_t(n_out));
  const auto x = test::random_floats(size_t(n_in * n_out), seed);
  for (int64_t r = 0; r < n_out; ++r) quantize_row_ref(type, x.data() + r * n_in, m.data() + size_t(r) * rb, n_in);
  return m;
}

using Acts = test::Q8KActs;  // Q8_K activations, as matmul makes them for k-quant weights

TEST(VerifyKernels, PackedQ4KGroupKernelEqualsScalarReference) {
  if (cpu::detected_isa() != Isa::Avx512) GTEST_SKIP() << "no AVX-512";
  const cpu::PackedDotFn fast = cpu::packed_dot_avx512(DType::Q4_K), ref = cpu::packed_dot_scalar(DType::Q4_K);
  ASSERT_NE(fast, nullptr);
  ASSERT_NE(ref, nullptr);
  for (int64_t n_in : {256, 768, 2048})
    for (int64_t n_out : {16, 37}) {
      const auto w = random_matrix(DType::Q4_K, n_in, n_out, uint32_t(n_in + n_out));
      const auto p = cpu::pack_matrix(DType::Q4_K, w.data(), n_in, n_out, row_bytes(DType::Q4_K, n_in));
      ASSERT_NE(p, nullptr);
      ASSERT_EQ(p->n_groups, n_out / 16);
      const auto x = test::random_floats(size_t(n_in * 8), uint32_t(n_in * 3 + n_out));
      const Acts a(x, n_in, 8);
      for (int k = 1; k <= 8; ++k)
        for (int64_t g = 0; g < p->n_groups; ++g) {
          SCOPED_TRACE(testing::Message() << "n_in " << n_in << " n_out " << n_out << " k " << k << " group " << g);
          std::vector<float> y_fast(size_t(16 * k), NAN), y_ref(size_t(16 * k), NAN);
          fast(*p, g, a.rows.data(), k, y_fast.data(), 16);
          ref(*p, g, a.rows.data(), k, y_ref.data(), 16);
          ASSERT_EQ(0, std::memcmp(y_fast.data(), y_ref.data(), y_ref.size() * sizeof(float)))
              << "first values " << y_fast[0] << " vs " << y_ref[0];
          // Token 0 of a k-token call is bit-identical to its 1-token call (batch invariance).
          std::vector<float> y1(16);
          fast(*p, g, a.rows.data(), 1, y1.data(), 16);
          ASSERT_EQ(0, std::memcmp(y1.data(), y_fast.data(), 16 * sizeof(float)));
        }
    }
}

// The whole matmul with the packed q4_K copy (groups + unpacked tail rows) against matmul_ref, every
// k = 1..8 and ISA, on n_out % 16 != 0; and each token's row equals its 1-token call byte for byte.
TEST(VerifyKernels, PackedQ4KMatmulMatchesReferenceAndIsBatchInvariant) {
  const int64_t n_in = 512, n_out = 16 * 5 + 7;
  const auto w = random_matrix(DType::Q4_K, n_in, n_out, 5u);
  WeightMatrix m{DType::Q4_K, w.data(), n_in, n_out, row_bytes(DType::Q4_K, n_in), nullptr};
  m.packed = cpu::pack_matrix(DType::Q4_K, w.data(), n_in, n_out, m.row_stride);
  ThreadPool pool(2);
  const auto x = test::random_floats(size_t(n_in * 8), 6u);
  // abs_dot[t][o] = Σ_i |W[o][i] * x[t][i]|: the 8-bit activations err by well under 1 % of it.
  std::vector<float> row(static_cast<size_t>(n_in));
  std::vector<double> abs_dot(size_t(8 * n_out), 0.0);
  for (int64_t o = 0; o < n_out; ++o) {
    dequantize_row_ref(DType::Q4_K, w.data() + size_t(o) * m.row_stride, row.data(), n_in);
    for (int t = 0; t < 8; ++t)
      for (int64_t i = 0; i < n_in; ++i) abs_dot[size_t(t * n_out + o)] += std::fabs(double(row[size_t(i)]) * x[size_t(t * n_in + i)]);
  }
  for (int k = 1; k <= 8; ++k) {
    std::vector<float> ref(size_t(n_out * k)), y(size_t(n_out * k));
    matmul_ref(m, x.data(), ref.data(), k);
    matmul(m, x.data(), y.data(), k, pool);
    for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], ref[i], 0.01 * abs_dot[i]) << "k " << k << " at " << i;
    for (int t = 0; t < k; ++t) {
      std::vector<float> one(static_cast<size_t>(n_out));
      matmul(m, x.data() + t * n_in, one.data(), 1, pool);
      ASSERT_EQ(0, std::memcmp(one.data(), y.data() + size_t(t * n_out), one.size() * sizeof(float)))
          << "token " << t << " of " << k;
    }
  }
}

// Every weight type through the row kernels (no packed copy) on every ISA, k = 1..8 tokens in one
// call (AVX-512 takes all 8 in one kernel call, AVX2 / scalar 4): within rounding of matmul_ref, and
// each token's outputs byte for byte those of its 1-token call. n_out = 21 (no 16-row or 8-row
// multiple); float rows of an odd length (SIMD tails).
TEST(VerifyKernels, RowKernelsAtEveryWidth) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                  DType::Q8_0, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    const int64_t n_in = is_float_type(t) ? 531 : dtype_info(t).block_size == 256 ? 768 : 32 * 13, n_out = 21;
    std::vector<uint8_t> w;
    if (t == DType::F32) {
      const auto f = test::random_floats(size_t(n_in * n_out), 8u);
      w.assign(reinterpret_cast<const uint8_t*>(f.data()), reinterpret_cast<const uint8_t*>(f.data() + f.size()));
    } else {
      w = random_matrix(t, n_in, n_out, 8u);
    }
    const WeightMatrix m{t, w.data(), n_in, n_out, row_bytes(t, n_in), nullptr};
    const auto x = test::random_floats(size_t(n_in * 8), 9u);
    std::vector<float> row(static_cast<size_t>(n_in));
    std::vector<double> abs_dot(size_t(8 * n_out), 0.0);
    for (int64_t o = 0; o < n_out; ++o) {
      dequantize_row_ref(t, w.data() + size_t(o) * m.row_stride, row.data(), n_in);
      for (int k = 0; k < 8; ++k)
        for (int64_t i = 0; i < n_in; ++i)
          abs_dot[size_t(k * n_out + o)] += std::fabs(double(row[size_t(i)]) * x[size_t(k * n_in + i)]);
    }
    ThreadPool pool(2);
    for (int isa = 0; isa <= int(cpu::detected_isa()); ++isa) {
      cpu::set_isa_override(Isa(isa));
      for (int k = 1; k <= 8; ++k) {
        SCOPED_TRACE(testing::Message() << dtype_name(t) << " " << cpu::isa_name(Isa(isa)) << " k " << k);
        std::vector<float> ref(size_t(n_out * k)), y(size_t(n_out * k));
        matmul_ref(m, x.data(), ref.data(), k);
        matmul(m, x.data(), y.data(), k, pool);
        const double rel = is_float_type(t) ? 1e-5 : 0.01;
        for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], ref[i], rel * abs_dot[i] + 1e-30) << "at " << i;
        for (int tok = 0; tok < k; ++tok) {
          std::vector<float> one(static_cast<size_t>(n_out));
          matmul(m, x.data() + tok * n_in, one.data(), 1, pool);
          ASSERT_EQ(0, std::memcmp(one.data(), y.data() + size_t(tok * n_out), one.size() * sizeof(float)))
              << "token " << tok;
        }
      }
    }
    cpu::clear_isa_override();
  }
}

}  // namespace
}  // namespace polykv
