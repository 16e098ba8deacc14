// The AVX2 group kernels for x16-packed MXFP4 (packed_kernels_avx2.h, PackKind::MXFP4; the maddubs and
// the AVX-VNNI policy): against the scalar packed reference (packed_dot_scalar) and the exact
// double-precision sum of the same quantized operands, at awkward sizes (one block, an odd number of
// blocks, gpt-oss's 2880, 4096 + 96), 1..8 tokens, random codes with exponents across the range
// including the subnormal scales (e = 0, 1) and large ones; bit-identical to the AVX-512 packed
// kernel where the CPU has it; and matmul under POLYKV_ISA=avx2 (IsaScope) packs mxfp4 and uses it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/matmul.h"
#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/packed_weights.h"
#include "core/cpu_features.h"
#include "core/isa.h"
#include "quant/mxfp4.h"
#include "quant/quant.h"
#include "test_util.h"

namespace polykv {
namespace {

using cpu::Isa;

// Random mxfp4 rows: random code bytes; exponents drawn from `exps`.
std::vector<uint8_t> random_rows(int64_t n_in, int64_t n_out, uint32_t seed, const std::vector<uint8_t>& exps) {
  const size_t rb = row_bytes(DType::MXFP4, n_in);
  std::vector<uint8_t> w(rb * size_t(n_out));
  std::mt19937 rng(seed);
  for (auto& b : w) b = uint8_t(rng());
  for (int64_t o = 0; o < n_out; ++o)
    for (int64_t b = 0; b < n_in / 32; ++b) w[size_t(o) * rb + size_t(b) * 17] = exps[rng() % exps.size()];
  return w;
}

// Q8_32 activations of n_tok random tokens (the matmul's quantizer), with ActRow views.
struct Acts {
  std::vector<int8_t> qs;
  std::vector<float> d;
  std::vector<int32_t> sum;
  std::vector<cpu::ActRow> rows;
};
Acts make_acts(int64_t n_in, int n_tok, uint32_t seed) {
  Acts a;
  const int64_t nb = n_in / 32;
  a.qs.resize(size_t(n_in * n_tok));
  a.d.resize(size_t(nb * n_tok));
  a.sum.resize(size_t(nb * n_tok));
  const auto x = test::random_floats(size_t(n_in * n_tok), seed);
  for (int t = 0; t < n_tok; ++t)
    cpu::quantize_act_q8_32(x.data() + t * n_in, n_in, a.qs.data() + t * n_in, a.d.data() + t * nb,
                            a.sum.data() + t * nb);
  for (int t = 0; t < n_tok; ++t)
    a.rows.push_back({nullptr, a.qs.data() + t * n_in, a.d.data() + t * nb, a.sum.data() + t * nb, nullptr});
  return a;
}

// Σ_b 2^(e_b - 128) d_a[b] Σ_j k_j q_j in double, from the original rows (not the packed copy).
double exact_dot(const uint8_t* row, const cpu::ActRow& a, int64_t n_in) {
  double s = 0;
  for (int64_t b = 0; b < n_in / 32; ++b) {
    const uint8_t* blk = row + b * 17;
    int64_t is = 0;
    for (int j = 0; j < 16; ++j)
      is += int64_t(kMxfp4Values[blk[1 + j] & 0x0F]) * a.qs[32 * b + j] +
            int64_t(kMxfp4Values[blk[1 + j] >> 4]) * a.qs[32 * b + 16 + j];
    s += double(mxfp4_scale(blk[0])) * double(a.d[b]) * double(is);
  }
  return s;
}

struct Kernel {
  const char* name;
  cpu::PackedDotFn fn;
};

std::vector<Kernel> avx2_kernels() {
  std::vector<Kernel> k;
  if (auto f = cpu::packed_dot_avx2_maddubs(DType::MXFP4)) k.push_back({"avx2-maddubs", f});
  if (auto f = cpu::packed_dot_avxvnni(DType::MXFP4)) k.push_back({"avx-vnni", f});
  return k;
}

TEST(Mxfp4PackedAvx2, HasAKernelWhereTheCpuHasAvx2) {
  if (!cpu_features().has_avx2_set()) GTEST_SKIP() << "no AVX2";
  EXPECT_NE(cpu::packed_dot_avx2(DType::MXFP4), nullptr);
  EXPECT_NE(cpu::packed_dot_avx2_maddubs(DType::MXFP4), nullptr);
}

TEST(Mxfp4PackedAvx2, MatchesScalarReferenceAndExactSum) {
  if (!cpu_features().has_avx2_set()) GTEST_SKIP() << "no AVX2";
  const auto kernels = avx2_kernels();
  ASSERT_FALSE(kernels.empty()) << "no AVX2 packed mxfp4 kernel";
  const cpu::PackedDotFn ref = cpu::packed_dot_scalar(DType::MXFP4);
  const cpu::PackedDotFn k512 = cpu::detected_isa() == Isa::Avx512 ? cpu::packed_dot_avx512(DType::MXFP4) : nullptr;
  // e: subnormal 0 and 1, around 2^0 (127..129), large (200: 2^72, finite in f32 after the dot) — one mix per matrix, and one of
  // mostly tiny scales.
  const std::vector<std::vector<uint8_t>> exp_sets = {{0, 1, 2, 118, 126, 127, 128, 129, 140, 200},
                                                      {0, 1, 2, 3}};
  const int64_t blocks[] = {1, 3, 90, 131};  // 32, 96, 2880 (gpt-oss), 4192 = 4096 + 96
  for (const auto& exps : exp_sets)
    for (int64_t nb : blocks) {
      const int64_t n_in = nb * 32, n_out = 48;  // 3 groups
      const auto w = random_rows(n_in, n_out, uint32_t(nb * 7 + exps.size()), exps);
      const size_t rb = row_bytes(DType::MXFP4, n_in);
      const auto packed = cpu::pack_matrix(DType::MXFP4, w.data(), n_in, n_out, rb);
      ASSERT_NE(packed, nullptr);
      for (int n_tok = 1; n_tok <= cpu::kMaxPackedTokens; ++n_tok) {
        const Acts a = make_acts(n_in, n_tok, uint32_t(nb * 100 + n_tok));
        for (int64_t g = 0; g < packed->n_groups; ++g) {
          std::vector<float> yr(size_t(16 * n_tok));
          ref(*packed, g, a.rows.data(), n_tok, yr.data(), 16);
          std::vector<float> y512;
          if (k512) {
            y512.resize(yr.size());
            k512(*packed, g, a.rows.data(), n_tok, y512.data(), 16);
          }
          for (const Kernel& k : kernels) {
            SCOPED_TRACE(testing::Message() << k.name << " n_in=" << n_in << " n_tok=" << n_tok << " group " << g
                                            << " exps " << exps.size());
            std::vector<float> y(yr.size(), NAN);
            k.fn(*packed, g, a.rows.data(), n_tok, y.data(), 16);
            if (k512) ASSERT_EQ(0, std::memcmp(y.data(), y512.data(), y.size() * sizeof(float))) << "vs AVX-512";
            for (int t = 0; t < n_tok; ++t)
              for (int r = 0; r < 16; ++r) {
                const uint8_t* row = w.data() + size_t(16 * g + r) * rb;
                const double exact = exact_dot(row, a.rows[size_t(t)], n_in);
                // Both sum the same exact block integers in f32: each may be off by about nb roundings
                // of the running sum's magnitude.
                double mag = 0;
                for (int64_t b = 0; b < nb; ++b)
                  mag += std::fabs(exact_dot(row + b * 17, {nullptr, a.rows[size_t(t)].qs + 32 * b,
                                                            a.rows[size_t(t)].d + b, nullptr, nullptr},
                                             32));
                const double tol = 4.0 * double(nb) * 6e-8 * mag + 1e-38;
                const float got = y[size_t(t * 16 + r)], want = yr[size_t(t * 16 + r)];
                ASSERT_NEAR(got, exact, tol) << "token " << t << " row " << r;
                ASSERT_NEAR(got, want, 2 * tol) << "token " << t << " row " << r << " vs scalar packed";
              }
          }
        }
      }
    }
}

// matmul with the ISA forced to AVX2 packs mxfp4 (pack_for_matmul) and agrees with the unpacked rows
// (row kernel) to float rounding, tail rows included (n_out = 37: 2 groups + 5 rows).
TEST(Mxfp4PackedAvx2, MatmulUnderForcedAvx2UsesThePackedCopy) {
  if (!isa_supported(Isa::Avx2)) GTEST_SKIP() << "no AVX2";
  IsaScope scope(Isa::Avx2);
  const int64_t n_in = 2880, n_out = 37, n_tok = 7;
  const auto bytes = random_rows(n_in, n_out, 5, {118, 120, 122, 124, 126, 127});
  WeightMatrix rows{DType::MXFP4, bytes.data(), n_in, n_out, row_bytes(DType::MXFP4, n_in)};
  WeightMatrix packed = rows;
  pack_for_matmul(packed);
  ASSERT_NE(packed.packed, nullptr) << "AVX2 does not pack mxfp4";
  EXPECT_FALSE(matmul_reads_original(WeightMatrix{rows.type, rows.data, n_in, 32, rows.row_stride, packed.packed}));
  const auto x = test::random_floats(size_t(n_in * n_tok), 6);
  std::vector<float> y_rows(size_t(n_out * n_tok)), y_packed(y_rows.size()), y_ref(y_rows.size());
  ThreadPool pool(2);
  matmul(rows, x.data(), y_rows.data(), n_tok, pool);
  matmul(packed, x.data(), y_packed.data(), n_tok, pool);
  matmul_ref(rows, x.data(), y_ref.data(), n_tok);
  double scale = 0;
  for (float v : y_ref) scale = std::max(scale, double(std::fabs(v)));
  for (size_t i = 0; i < y_rows.size(); ++i) {
    EXPECT_NEAR(y_packed[i], y_rows[i], 1e-5 * scale) << i;
    EXPECT_NEAR(y_packed[i], y_ref[i], 2e-2 * scale) << i;  // activation rounding to q8
  }
}

}  // namespace
}  // namespace polykv
