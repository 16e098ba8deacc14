// The AVX2 group kernels of the x16 packed layout (packed_kernels_avx2.h): both integer policies
// (vpmaddubsw, AVX-VNNI) against the scalar group kernel on awkward sizes and every bit pattern,
// bit-identical to each other and to the AVX-512 kernel, and batch-invariant (a token's 16 results
// are the same bits alone or among 1..8 tokens, at any place).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/packed_weights.h"
#include "core/fp16.h"
#include "core/isa.h"
#include "quant/quant.h"
#include "test_util.h"

namespace polykv::cpu {
namespace {

// Random q4_0 / q8_0 rows (every byte pattern, q8_0's -128 included) with small fp16 scales.
std::vector<uint8_t> random_rows(DType t, int64_t n_in, int64_t n_out, uint32_t seed) {
  const size_t rb = row_bytes(t, n_in), block = t == DType::Q4_0 ? 18 : 34;
  std::vector<uint8_t> bytes(rb * size_t(n_out));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> scale(-0.02f, 0.02f);
  for (auto& b : bytes) b = uint8_t(rng());
  for (size_t at = 0; at < bytes.size(); at += block) {
    const uint16_t h = f32_to_fp16(scale(rng));
    std::memcpy(&bytes[at], &h, 2);
  }
  return bytes;
}

// Quantized activations of n_tok tokens (the matmul's Q8_32 format).
struct Acts {
  std::vector<int8_t> qs;
  std::vector<float> d;
  std::vector<int32_t> sum;
  std::vector<ActRow> rows;
};

Acts make_acts(int64_t n_in, int n_tok, uint32_t seed) {
  Acts a;
  const auto x = test::random_floats(size_t(n_in * n_tok), seed);
  const size_t nb = size_t(n_in / 32);
  a.qs.resize(size_t(n_in * n_tok));
  a.d.resize(nb * size_t(n_tok));
  a.sum.resize(nb * size_t(n_tok));
  for (int t = 0; t < n_tok; ++t)
    quantize_act_q8_32(x.data() + t * n_in, n_in, a.qs.data() + t * n_in, a.d.data() + t * nb,
                       a.sum.data() + t * nb);
  for (int t = 0; t < n_tok; ++t) {
    ActRow r;
    r.qs = a.qs.data() + t * n_in;
    r.d = a.d.data() + t * nb;
    r.sum = a.sum.data() + t * nb;
    a.rows.push_back(r);
  }
  return a;
}

struct Variant {
  const char* name;
  PackedDotFn fn;
};

std::vector<Variant> avx2_variants(DType t) {
  std::vector<Variant> v;
  if (PackedDotFn f = packed_dot_avx2_maddubs(t)) v.push_back({"maddubs", f});
  if (PackedDotFn f = packed_dot_avxvnni(t)) v.push_back({"avx-vnni", f});
  return v;
}

TEST(PackedAvx2, MatchesScalarAndAvx512BitForBit) {
  if (avx2_variants(DType::Q4_0).empty()) GTEST_SKIP() << "no AVX2";
  for (DType t : {DType::Q4_0, DType::Q8_0})
    for (int64_t blocks : {1, 3, 7, 64}) {
      const int64_t n_in = 32 * blocks, n_out = 48;
      const auto rows = random_rows(t, n_in, n_out, uint32_t(blocks) * 7u + uint32_t(t));
      const auto p = pack_matrix(t, rows.data(), n_in, n_out, row_bytes(t, n_in));
      ASSERT_TRUE(p);
      const int n_tok = 8;
      const Acts a = make_acts(n_in, n_tok, uint32_t(blocks) + 5u);
      for (int64_t g = 0; g < p->n_groups; ++g) {
        std::vector<float> ref(size_t(n_tok) * kPackRows), avx512(ref.size());
        packed_dot_scalar(t)(*p, g, a.rows.data(), n_tok, ref.data(), kPackRows);
        // Only where this CPU runs AVX-512 (the table returns the kernel whatever the CPU).
        const PackedDotFn f512 = isa_supported(Isa::Avx512) ? packed_dot_avx512(t) : nullptr;
        if (f512) f512(*p, g, a.rows.data(), n_tok, avx512.data(), kPackRows);
        std::vector<float> first;
        for (const Variant& v : avx2_variants(t)) {
          SCOPED_TRACE(testing::Message() << dtype_name(t) << " n_in " << n_in << " group " << g << " " << v.name);
          std::vector<float> y(ref.size(), NAN);
          v.fn(*p, g, a.rows.data(), n_tok, y.data(), kPackRows);
          for (size_t i = 0; i < y.size(); ++i) {
            // Same integers, float sums in another order than the scalar kernel: rounding only.
            ASSERT_NEAR(y[i], ref[i], 1e-5 * (1 + std::fabs(ref[i])) * double(blocks)) << "at " << i;
          }
          if (f512) EXPECT_EQ(0, std::memcmp(y.data(), avx512.data(), y.size() * sizeof(float)));
          if (first.empty()) first = y;
          EXPECT_EQ(0, std::memcmp(y.data(), first.data(), y.size() * sizeof(float)));
        }
      }
    }
}

TEST(PackedAvx2, TokenResultsDoNotDependOnTheBatch) {
  if (avx2_variants(DType::Q4_0).empty()) GTEST_SKIP() << "no AVX2";
  for (DType t : {DType::Q4_0, DType::Q8_0}) {
    const int64_t n_in = 32 * 5, n_out = 32;
    const auto rows = random_rows(t, n_in, n_out, 99u);
    const auto p = pack_matrix(t, rows.data(), n_in, n_out, row_bytes(t, n_in));
    const Acts a = make_acts(n_in, 8, 17u);
    for (const Variant& v : avx2_variants(t)) {
      std::vector<float> all(8 * kPackRows);
      v.fn(*p, 1, a.rows.data(), 8, all.data(), kPackRows);
      for (int n_tok = 1; n_tok <= 8; ++n_tok)
        for (int t0 = 0; t0 + n_tok <= 8; ++t0) {
          std::vector<float> y(size_t(n_tok) * kPackRows);
          v.fn(*p, 1, a.rows.data() + t0, n_tok, y.data(), kPackRows);
          ASSERT_EQ(0, std::memcmp(y.data(), all.data() + t0 * kPackRows, y.size() * sizeof(float)))
              << dtype_name(t) << " " << v.name << " tokens " << t0 << "+" << n_tok;
        }
    }
  }
}

}  // namespace
}  // namespace polykv::cpu
