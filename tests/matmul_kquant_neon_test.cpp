// ARM64 NEON k-quant row kernels (kquant_kernels_neon.h) against the scalar reference kernels
// (kquant_kernels_scalar.cpp) for both integer variants: plain ARMv8-A and SDOT (where this CPU has
// dotprod; under qemu the default CPU has it, QEMU_CPU=cortex-a72 does not). Built on ARM64 only.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/matmul_kernels.h"
#include "core/cpu_features.h"
#include "core/fp16.h"
#include "quant/blocks.h"
#include "test_util.h"

namespace polykv::cpu {
namespace {

struct KType {
  DType type;
  size_t block;                  // bytes per super-block
  size_t d_off, dmin_off;        // fp16 scale fields (dmin_off == SIZE_MAX: none)
};
const KType kTypes[] = {
    {DType::Q4_K, sizeof(BlockQ4_K), offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)},
    {DType::Q6_K, sizeof(BlockQ6_K), offsetof(BlockQ6_K, d), SIZE_MAX},
    {DType::Q5_K, sizeof(BlockQ5_K), offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin)},
    {DType::Q2_K, sizeof(BlockQ2_K), offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)},
    {DType::Q3_K, sizeof(BlockQ3_K), offsetof(BlockQ3_K, d), SIZE_MAX},
};

// One random row: every quant, scale and mask byte random (q6_K's int8 scales include -128), the
// fp16 super-block scales finite and of either sign.
std::vector<uint8_t> random_row(const KType& k, int64_t blocks, uint32_t seed) {
  std::vector<uint8_t> w(size_t(blocks) * k.block);
  std::mt19937 rng(seed);
  for (auto& b : w) b = uint8_t(rng());
  std::uniform_real_distribution<float> scale(-0.02f, 0.02f);
  for (size_t off = 0; off < w.size(); off += k.block) {
    const uint16_t d = f32_to_fp16(scale(rng)), dmin = f32_to_fp16(scale(rng));
    std::memcpy(&w[off + k.d_off], &d, 2);
    if (k.dmin_off != SIZE_MAX) std::memcpy(&w[off + k.dmin_off], &dmin, 2);
  }
  return w;
}

struct Acts {
  std::vector<int8_t> qs;
  std::vector<float> d;
  std::vector<int16_t> bsums;
  std::vector<ActRow> rows;
};

Acts quantized_acts(int64_t n_in, int n_tok, uint32_t seed) {
  const std::vector<float> x = test::random_floats(size_t(n_in * n_tok), seed);
  const int64_t nb = n_in / 256;
  Acts a;
  a.qs.resize(size_t(n_in * n_tok));
  a.d.resize(size_t(nb * n_tok));
  a.bsums.resize(size_t(n_in / 16 * n_tok));
  for (int t = 0; t < n_tok; ++t)
    quantize_act_q8_K(x.data() + t * n_in, n_in, a.qs.data() + t * n_in, a.d.data() + t * nb,
                      a.bsums.data() + t * (n_in / 16));
  for (int t = 0; t < n_tok; ++t)
    a.rows.push_back({nullptr, a.qs.data() + t * n_in, a.d.data() + t * nb, nullptr, a.bsums.data() + t * (n_in / 16)});
  return a;
}

// Every token count 1..8 at every offset, rows of 1, 2 and 5 super-blocks: each NEON variant matches
// the scalar kernel (the same exact integers, the same float steps: within a few ulps of the
// magnitude), the variants agree bit for bit, and token t's result does not depend on the call.
TEST(MatmulNeon, KquantRowKernelsMatchScalar) {
  std::vector<std::pair<const char*, RowDotFn (*)(DType)>> variants = {{"plain", row_dot_neon_plain}};
  if (cpu_features().asimd_dot) variants.push_back({"dotprod", row_dot_neon});
  std::printf("NEON variants tested: %s\n", cpu_features().asimd_dot ? "plain, dotprod" : "plain (no dotprod)");
  for (const KType& k : kTypes) {
    for (int64_t blocks : {1, 2, 5}) {
      const int64_t n_in = 256 * blocks;
      const std::vector<uint8_t> w = random_row(k, blocks, uint32_t(7 * blocks + int(k.type)));
      const Acts a = quantized_acts(n_in, kMaxTokensPerCall, uint32_t(300 + blocks));
      float ref[kMaxTokensPerCall], mag[kMaxTokensPerCall];
      row_dot_scalar(k.type)(w.data(), a.rows.data(), kMaxTokensPerCall, n_in, ref);
      // Magnitude of the terms (not of the sum, which may cancel): |d| * Σ|a| * 64 * 64 bounds them.
      for (int t = 0; t < kMaxTokensPerCall; ++t) {
        float s = 0.0f;
        for (int64_t b = 0; b < blocks; ++b) s += std::fabs(a.rows[t].d[b]) * 127.0f * 256.0f * 64.0f * 0.02f;
        mag[t] = s;
      }
      float first[kMaxTokensPerCall] = {};
      for (size_t v = 0; v < variants.size(); ++v) {
        const RowDotFn f = variants[v].second(k.type);
        ASSERT_NE(f, nullptr) << variants[v].first << " " << dtype_name(k.type);
        for (int nt = 1; nt <= kMaxTokensPerCall; ++nt)
          for (int t0 = 0; t0 + nt <= kMaxTokensPerCall; t0 += nt) {
            float out[kMaxTokensPerCall];
            f(w.data(), a.rows.data() + t0, nt, n_in, out);
            for (int i = 0; i < nt; ++i) {
              SCOPED_TRACE(testing::Message() << dtype_name(k.type) << " " << variants[v].first
                                              << " n_in=" << n_in << " nt=" << nt << " token=" << t0 + i);
              EXPECT_NEAR(out[i], ref[t0 + i], 1e-6f * mag[t0 + i]);
              if (nt == 1 && v == 0) first[t0 + i] = out[i];
              EXPECT_EQ(out[i], first[t0 + i]);  // batch invariance, and plain == dotprod
            }
          }
      }
    }
  }
}

// A wrong unpack would still be near zero for random data if the test tolerance were loose; this
// checks the tolerance is tight: a one-step change of one quant moves the result by more than it.
TEST(MatmulNeon, KquantToleranceDetectsOneQuantStep) {
  const KType& k = kTypes[0];  // q4_K
  std::vector<uint8_t> w = random_row(k, 1, 11);
  const Acts a = quantized_acts(256, 1, 12);
  float ref = 0.0f, got = 0.0f;
  row_dot_scalar(k.type)(w.data(), a.rows.data(), 1, 256, &ref);
  // Flip the low nibble of the first quant byte where the activation is large.
  int best = 0;
  for (int i = 0; i < 32; ++i)
    if (std::abs(a.qs[size_t(i)]) > std::abs(a.qs[size_t(best)])) best = i;
  w[offsetof(BlockQ4_K, qs) + size_t(best)] ^= 1;
  row_dot_neon_plain(k.type)(w.data(), a.rows.data(), 1, 256, &got);
  const float mag = std::fabs(a.rows[0].d[0]) * 127.0f * 256.0f * 64.0f * 0.02f;
  EXPECT_GT(std::fabs(got - ref), 1e-6f * mag) << "a one-quant change hides inside the tolerance";
}

}  // namespace
}  // namespace polykv::cpu
