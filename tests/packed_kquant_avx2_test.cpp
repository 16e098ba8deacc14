// The AVX2 group kernels of the k-quant x16 packed layouts (packed_kquant_avx2.h, q4_K, q5_K, q6_K):
// both integer policies (vpmaddubsw, AVX-VNNI) against the scalar group kernels bit for bit (and the
// AVX-512 q4_K kernel), the scalar group kernels against an independent float reference, batch
// invariance (a token's 16 results are the same bits alone or among 1..8 tokens, at any place), and
// matmul() forced to AVX2 on packed k-quant matrices at awkward shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/matmul.h"
#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/packed_weights.h"
#include "core/fp16.h"
#include "core/isa.h"
#include "core/thread_pool.h"
#include "quant/blocks.h"
#include "quant/quant.h"
#include "test_util.h"

namespace polykv::cpu {
namespace {

const DType kKTypes[] = {DType::Q4_K, DType::Q5_K, DType::Q6_K};

// Random k-quant rows: every quant and scale byte pattern, small fp16 d (and dmin) so nothing
// overflows.
std::vector<uint8_t> random_rows(DType t, int64_t n_in, int64_t n_out, uint32_t seed) {
  const size_t rb = row_bytes(t, n_in);
  std::vector<uint8_t> bytes(rb * size_t(n_out));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> scale(-0.002f, 0.002f);
  for (auto& b : bytes) b = uint8_t(rng());
  const size_t block = size_t(dtype_info(t).type_size);
  for (size_t at = 0; at < bytes.size(); at += block) {
    const uint16_t d = f32_to_fp16(scale(rng)), dmin = f32_to_fp16(scale(rng));
    if (t != DType::Q6_K) {  // q4_K and q5_K start with d, dmin
      static_assert(offsetof(BlockQ4_K, dmin) == 2 && offsetof(BlockQ5_K, dmin) == 2);
      std::memcpy(&bytes[at], &d, 2);
      std::memcpy(&bytes[at + 2], &dmin, 2);
    } else {
      std::memcpy(&bytes[at + offsetof(BlockQ6_K, d)], &d, 2);
    }
  }
  return bytes;
}

// Quantized activations of n_tok tokens (the matmul's Q8_K format).
struct Acts {
  std::vector<int8_t> qs;
  std::vector<float> d;
  std::vector<int16_t> bsums;
  std::vector<ActRow> rows;
};

Acts make_acts(int64_t n_in, int n_tok, uint32_t seed) {
  Acts a;
  const auto x = test::random_floats(size_t(n_in * n_tok), seed);
  const size_t nb = size_t(n_in / 256);
  a.qs.resize(size_t(n_in * n_tok));
  a.d.resize(nb * size_t(n_tok));
  a.bsums.resize(nb * 16 * size_t(n_tok));
  for (int t = 0; t < n_tok; ++t)
    quantize_act_q8_K(x.data() + t * n_in, n_in, a.qs.data() + t * n_in, a.d.data() + t * nb,
                      a.bsums.data() + t * nb * 16);
  for (int t = 0; t < n_tok; ++t) {
    ActRow r;
    r.qs = a.qs.data() + t * n_in;
    r.d = a.d.data() + t * nb;
    r.bsums = a.bsums.data() + t * nb * 16;
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

// The scalar group kernels against the dequantized weights times the dequantized activations (double).
TEST(PackedKquant, ScalarGroupKernelMatchesDequantizedDot) {
  for (DType t : kKTypes)
    for (int64_t blocks : {1, 3}) {
      const int64_t n_in = 256 * blocks, n_out = 32;
      const auto rows = random_rows(t, n_in, n_out, uint32_t(blocks) * 3u + uint32_t(t));
      const auto p = pack_matrix(t, rows.data(), n_in, n_out, row_bytes(t, n_in));
      ASSERT_TRUE(p);
      const int n_tok = 3;
      const Acts a = make_acts(n_in, n_tok, 11u);
      std::vector<float> w(static_cast<size_t>(n_in));
      for (int64_t g = 0; g < p->n_groups; ++g) {
        std::vector<float> y(size_t(n_tok) * kPackRows);
        packed_dot_scalar(t)(*p, g, a.rows.data(), n_tok, y.data(), kPackRows);
        for (int r = 0; r < kPackRows; ++r) {
          dequantize_row_ref(t, rows.data() + size_t(g * kPackRows + r) * row_bytes(t, n_in), w.data(), n_in);
          for (int tk = 0; tk < n_tok; ++tk) {
            double ref = 0, mag = 0;
            for (int64_t i = 0; i < n_in; ++i) {
              const double x = double(a.rows[size_t(tk)].d[i / 256]) * a.rows[size_t(tk)].qs[i];
              ref += double(w[size_t(i)]) * x;
              mag += std::fabs(double(w[size_t(i)]) * x);
            }
            ASSERT_NEAR(y[size_t(tk * kPackRows + r)], ref, 1e-5 * mag + 1e-30)
                << dtype_name(t) << " group " << g << " row " << r << " token " << tk;
          }
        }
      }
    }
}

TEST(PackedKquant, Avx2MatchesScalarBitForBit) {
  if (avx2_variants(DType::Q4_K).empty()) GTEST_SKIP() << "no AVX2";
  for (DType t : kKTypes)
    for (int64_t blocks : {1, 2, 5, 9}) {
      const int64_t n_in = 256 * blocks, n_out = 48;
      const auto rows = random_rows(t, n_in, n_out, uint32_t(blocks) * 7u + uint32_t(t));
      const auto p = pack_matrix(t, rows.data(), n_in, n_out, row_bytes(t, n_in));
      ASSERT_TRUE(p);
      ASSERT_EQ(avx2_variants(t).size(), avx2_variants(DType::Q4_K).size());
      for (int n_tok : {1, 3, 8}) {
        const Acts a = make_acts(n_in, n_tok, uint32_t(blocks) + 5u);
        for (int64_t g = 0; g < p->n_groups; ++g) {
          std::vector<float> ref(size_t(n_tok) * kPackRows), avx512(ref.size());
          packed_dot_scalar(t)(*p, g, a.rows.data(), n_tok, ref.data(), kPackRows);
          // Only where this CPU runs AVX-512 (the table returns the kernel whatever the CPU).
          const PackedDotFn f512 = isa_supported(Isa::Avx512) ? packed_dot_avx512(t) : nullptr;
          if (f512) f512(*p, g, a.rows.data(), n_tok, avx512.data(), kPackRows);
          for (const Variant& v : avx2_variants(t)) {
            SCOPED_TRACE(testing::Message() << dtype_name(t) << " n_in " << n_in << " tokens " << n_tok << " group "
                                            << g << " " << v.name);
            std::vector<float> y(ref.size(), NAN);
            v.fn(*p, g, a.rows.data(), n_tok, y.data(), kPackRows);
            for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], ref[i]) << "at token " << i / 16 << " row " << i % 16;
            if (f512) EXPECT_EQ(0, std::memcmp(y.data(), avx512.data(), y.size() * sizeof(float)));
          }
        }
      }
    }
}

TEST(PackedKquant, TokenResultsDoNotDependOnTheBatch) {
  if (avx2_variants(DType::Q4_K).empty()) GTEST_SKIP() << "no AVX2";
  for (DType t : kKTypes) {
    const int64_t n_in = 256 * 3, n_out = 32;
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

// matmul() forced to AVX2 on packed q4_K / q5_K / q6_K matrices: n_out with tail rows, token counts across
// the 4-token passes, the 8-token calls and several token tiles, 1 and 2 threads; against matmul_ref
// within the activation-quantization bound, and equal to the scalar packed kernels bit for bit.
TEST(PackedKquant, MatmulForcedAvx2MatchesReference) {
  if (!isa_supported(Isa::Avx2)) GTEST_SKIP() << "no AVX2";
  ThreadPool pool2(2);
  for (DType t : kKTypes)
    for (auto [blocks, n_out, n_tok] : {std::tuple{1, 16, 1}, {2, 37, 2}, {3, 61, 5}, {8, 50, 13}, {1, 33, 40}}) {
      const int64_t n_in = 256 * blocks;
      SCOPED_TRACE(testing::Message() << dtype_name(t) << " n_in " << n_in << " n_out " << n_out << " tokens " << n_tok);
      auto rows = random_rows(t, n_in, n_out, uint32_t(n_out) + uint32_t(t));
      WeightMatrix w{t, rows.data(), n_in, n_out, row_bytes(t, n_in)};
      w.packed = pack_matrix(t, w.data, n_in, n_out, w.row_stride);
      const auto x = test::random_floats(size_t(n_in * n_tok), 5u + uint32_t(n_tok));
      std::vector<float> ref(size_t(n_out * n_tok)), y(ref.size(), NAN), y_scalar(ref.size(), NAN);
      matmul_ref(w, x.data(), ref.data(), n_tok);
      force_isa(Isa::Scalar);
      matmul(w, x.data(), y_scalar.data(), n_tok, pool2);
      force_isa(Isa::Avx2);
      matmul(w, x.data(), y.data(), n_tok, pool2);
      clear_forced_isa();
      double scale = 0;
      for (float v : ref) scale = std::max(scale, double(std::fabs(v)));
      for (size_t i = 0; i < y.size(); ++i) {
        ASSERT_NEAR(y[i], ref[i], 0.03 * scale + 1e-30) << "at " << i;  // 8-bit activations
        if (int64_t(i % size_t(n_out)) < n_out / 16 * 16) ASSERT_EQ(y[i], y_scalar[i]) << "packed row at " << i;
      }
    }
}

// The AVX2 activation quantizers produce the scalar ones' bytes exactly (zero blocks, ties at .5,
// values that round to ±127, a huge outlier).
TEST(PackedKquant, Avx2ActQuantIsBitExact) {
  if (!isa_supported(Isa::Avx2)) GTEST_SKIP() << "no AVX2";
  const int64_t n = 5 * 256;
  auto x = test::random_floats(size_t(n), 31u);
  for (int i = 0; i < 32; ++i) x[size_t(i)] = 0.0f;                   // an all-zero 32-block
  for (int i = 32; i < 64; ++i) x[size_t(i)] = float(i - 48) * 0.5f;  // exact .5 ties
  for (int i = 512; i < 768; ++i) x[size_t(i)] = 0.0f;                // an all-zero 256-block
  x[300] = 1e4f;
  x[1000] = -3e-3f;
  std::vector<int8_t> qa(static_cast<size_t>(n)), qb(static_cast<size_t>(n));
  std::vector<float> da(size_t(n / 32)), db(da.size());
  std::vector<int32_t> sa(size_t(n / 32)), sb(sa.size());
  quantize_act_q8_32(x.data(), n, qa.data(), da.data(), sa.data());
  quantize_act_q8_32_avx2(x.data(), n, qb.data(), db.data(), sb.data());
  EXPECT_EQ(qa, qb);
  EXPECT_EQ(0, std::memcmp(da.data(), db.data(), da.size() * sizeof(float)));
  EXPECT_EQ(sa, sb);
  std::vector<int16_t> ba(size_t(n / 16)), bb(ba.size());
  quantize_act_q8_K(x.data(), n, qa.data(), da.data(), ba.data());
  quantize_act_q8_K_avx2(x.data(), n, qb.data(), db.data(), bb.data());
  EXPECT_EQ(qa, qb);
  EXPECT_EQ(0, std::memcmp(da.data(), db.data(), size_t(n / 256) * sizeof(float)));
  EXPECT_EQ(ba, bb);
}

}  // namespace
}  // namespace polykv::cpu
