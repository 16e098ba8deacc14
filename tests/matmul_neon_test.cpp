// ARM64 NEON matmul row kernels (matmul_kernels_neon.cpp, legacy_kernels_neon.h) against the scalar
// reference kernels on awkward sizes, for both integer variants: the plain ARMv8-A one and the
// SDOT one (where this CPU has dotprod; under qemu, the default CPU has it, QEMU_CPU=cortex-a72
// does not). Built on ARM64 only (CMakeLists.txt); the ISA-parametrized matmul tests also run neon.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/mxfp4_kernels.h"
#include "core/cpu_features.h"
#include "core/fp16.h"
#include "quant/blocks.h"
#include "test_util.h"

namespace polykv::cpu {
namespace {

// Random legacy-quant / mxfp4 rows: every quant (and fifth-bit) byte random (q8_0 includes -128),
// scales (and q4_1 / q5_1 mins) finite, of either sign (mxfp4: exponents 120..135).
std::vector<uint8_t> random_rows(DType t, int64_t n_in, int n_rows, uint32_t seed) {
  const size_t block = row_bytes(t, 32);
  const bool has_min = t == DType::Q4_1 || t == DType::Q5_1;
  std::vector<uint8_t> w(size_t(n_rows) * size_t(n_in / 32) * block);
  std::mt19937 rng(seed);
  for (auto& b : w) b = uint8_t(rng());
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  for (size_t off = 0; off < w.size(); off += block) {
    const uint16_t d = f32_to_fp16(scale(rng)), m = f32_to_fp16(scale(rng));
    if (t == DType::MXFP4) {
      w[off] = uint8_t(120 + rng() % 16);  // E8M0 exponent e: scale 2^(e - 128), finite
      continue;
    }
    std::memcpy(&w[off], &d, 2);
    if (has_min) std::memcpy(&w[off + 2], &m, 2);
  }
  return w;
}

struct Acts {
  std::vector<int8_t> qs;
  std::vector<float> d;
  std::vector<int32_t> sum;
  std::vector<ActRow> rows;
};

Acts quantized_acts(int64_t n_in, int n_tok, uint32_t seed) {
  const std::vector<float> x = test::random_floats(size_t(n_in * n_tok), seed);
  Acts a;
  a.qs.resize(size_t(n_in * n_tok));
  a.d.resize(size_t(n_in / 32 * n_tok));
  a.sum.resize(a.d.size());
  for (int t = 0; t < n_tok; ++t)
    quantize_act_q8_32(x.data() + t * n_in, n_in, a.qs.data() + t * n_in, a.d.data() + t * (n_in / 32),
                       a.sum.data() + t * (n_in / 32));
  for (int t = 0; t < n_tok; ++t)
    a.rows.push_back({nullptr, a.qs.data() + t * n_in, a.d.data() + t * (n_in / 32), a.sum.data() + t * (n_in / 32),
                      nullptr});
  return a;
}

// Every token count 1..8 and sizes of 1, 3, 7 and 129 blocks: each NEON variant matches the scalar
// kernel (same integers, same float order: within a few ulps of the magnitude), the variants agree
// bit for bit, and token t's result does not depend on how many tokens share the call.
TEST(MatmulNeon, LegacyRowKernelsMatchScalar) {
  std::vector<std::pair<const char*, RowDotFn (*)(DType)>> variants = {{"plain", row_dot_neon_plain}};
  if (cpu_features().asimd_dot) variants.push_back({"dotprod", row_dot_neon});
  std::printf("NEON variants tested: %s\n", cpu_features().asimd_dot ? "plain, dotprod" : "plain (no dotprod)");
  for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::MXFP4}) {
    for (int64_t blocks : {1, 3, 7, 129}) {
      const int64_t n_in = 32 * blocks;
      const std::vector<uint8_t> w = random_rows(t, n_in, 1, uint32_t(blocks));
      const Acts a = quantized_acts(n_in, kMaxTokensPerCall, uint32_t(100 + blocks));
      float ref[kMaxTokensPerCall], mag[kMaxTokensPerCall];
      const RowDotFn scalar = t == DType::MXFP4 ? mxfp4_row_dot_scalar(t) : row_dot_scalar(t);
      scalar(w.data(), a.rows.data(), kMaxTokensPerCall, n_in, ref);
      for (int k = 0; k < kMaxTokensPerCall; ++k) mag[k] = std::fabs(ref[k]) + 1e-3f;
      float first[kMaxTokensPerCall] = {};
      for (size_t v = 0; v < variants.size(); ++v) {
        const RowDotFn f = variants[v].second(t);
        ASSERT_NE(f, nullptr) << variants[v].first;
        for (int nt = 1; nt <= kMaxTokensPerCall; ++nt)
          for (int t0 = 0; t0 + nt <= kMaxTokensPerCall; t0 += nt) {
            float out[kMaxTokensPerCall];
            f(w.data(), a.rows.data() + t0, nt, n_in, out);
            for (int k = 0; k < nt; ++k) {
              SCOPED_TRACE(testing::Message() << dtype_name(t) << " " << variants[v].first << " n_in=" << n_in
                                              << " nt=" << nt << " token=" << t0 + k);
              EXPECT_NEAR(out[k], ref[t0 + k], 1e-5f * mag[t0 + k] * float(blocks));
              if (nt == 1 && v == 0) first[t0 + k] = out[k];
              EXPECT_EQ(out[k], first[t0 + k]);  // batch invariance, and plain == dotprod
            }
          }
      }
    }
  }
}

}  // namespace
}  // namespace polykv::cpu
