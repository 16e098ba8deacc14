// The AVX-512 packed q4_0 / q8_0 / mxfp4 kernels have three paths (issue #10, docs/VERIFY_KERNELS.md
// "2026-12-01f"): the zero-point term from ActRow::sum (the former code), from the precomputed
// ActRow::zp, and the strided kernel for tokens laid out at one stride (what matmul() makes). All
// three must give the same bits for every call width k = 1..8, and each token's outputs must not
// depend on k; the scalar packed reference must agree within rounding. Awkward sizes: n_in of 1, 3
// and 65 blocks, 3 groups of 16 rows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/matmul.h"
#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/packed_weights.h"
#include "core/thread_pool.h"
#include "quant/quant.h"
#include "test_util.h"

namespace polykv {
namespace {

using cpu::ActRow;
using cpu::Isa;

std::vector<uint8_t> random_matrix(DType type, int64_t n_in, int64_t n_out, uint32_t seed) {
  const size_t rb = row_bytes(type, n_in);
  std::vector<uint8_t> m(rb * size_t(n_out));
  const auto x = test::random_floats(size_t(n_in * n_out), seed);
  for (int64_t r = 0; r < n_out; ++r) quantize_row_ref(type, x.data() + r * n_in, m.data() + size_t(r) * rb, n_in);
  return m;
}

// Q8_32 activations of n_tok tokens in two layouts: one record per token at a common stride (qs, d,
// sum, zp at fixed offsets, as matmul() lays them out) and separate vectors per token.
struct Acts {
  int64_t n_in, nb;
  size_t stride;
  std::vector<uint8_t> strided;  // [n_tok][stride]
  std::vector<std::vector<int8_t>> qs;
  std::vector<std::vector<float>> d;
  std::vector<std::vector<int32_t>> sum, zp;
  Acts(const std::vector<float>& x, int64_t n_in_, int n_tok, int32_t offset) : n_in(n_in_), nb(n_in_ / 32) {
    stride = size_t(n_in) + size_t(nb) * 12 + 64;  // qs, d, sum, zp, padding; deliberately not 64-aligned parts
    strided.assign(stride * size_t(n_tok), 0);
    for (int t = 0; t < n_tok; ++t) {
      qs.emplace_back(size_t(n_in));
      d.emplace_back(size_t(nb));
      sum.emplace_back(size_t(nb));
      zp.emplace_back(size_t(nb));
      cpu::quantize_act_q8_32(x.data() + t * n_in, n_in, qs.back().data(), d.back().data(), sum.back().data());
      for (int64_t b = 0; b < nb; ++b) zp.back()[size_t(b)] = -offset * sum.back()[size_t(b)];
      uint8_t* p = strided.data() + size_t(t) * stride;
      std::memcpy(p, qs.back().data(), size_t(n_in));
      std::memcpy(p + n_in, d.back().data(), size_t(nb) * 4);
      std::memcpy(p + n_in + nb * 4, sum.back().data(), size_t(nb) * 4);
      std::memcpy(p + n_in + nb * 8, zp.back().data(), size_t(nb) * 4);
    }
  }
  // with_zp: ActRow::zp set; strided: the pointers into `strided` (else into the separate vectors).
  std::vector<ActRow> rows(int t0, int n, bool with_zp, bool strided_layout) const {
    std::vector<ActRow> r(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      const size_t t = size_t(t0 + i);
      if (strided_layout) {
        const uint8_t* p = strided.data() + t * stride;
        r[size_t(i)].qs = reinterpret_cast<const int8_t*>(p);
        r[size_t(i)].d = reinterpret_cast<const float*>(p + n_in);
        r[size_t(i)].sum = reinterpret_cast<const int32_t*>(p + n_in + nb * 4);
        if (with_zp) r[size_t(i)].zp = reinterpret_cast<const int32_t*>(p + n_in + nb * 8);
      } else {
        r[size_t(i)].qs = qs[t].data();
        r[size_t(i)].d = d[t].data();
        r[size_t(i)].sum = sum[t].data();
        if (with_zp) r[size_t(i)].zp = zp[t].data();
      }
    }
    return r;
  }
};

class VerifyZeroPoint : public ::testing::TestWithParam<DType> {};

TEST_P(VerifyZeroPoint, AllPathsGiveTheSameBitsAtEveryWidth) {
  if (cpu::detected_isa() != Isa::Avx512) GTEST_SKIP() << "no AVX-512";
  const DType type = GetParam();
  const cpu::PackedDotFn fast = cpu::packed_dot_avx512(type), ref = cpu::packed_dot_scalar(type);
  ASSERT_NE(fast, nullptr);
  ASSERT_NE(ref, nullptr);
  const int32_t offset = cpu::packed_zero_point(type);
  ASSERT_NE(offset, 0);
  constexpr int kMaxTok = 8;
  for (int64_t n_in : {32, 96, 2080}) {
    const int64_t n_out = 48;
    const auto m = random_matrix(type, n_in, n_out, uint32_t(n_in) * 7 + 1);
    const auto p = cpu::pack_matrix(type, m.data(), n_in, n_out, row_bytes(type, n_in));
    ASSERT_TRUE(p);
    const auto x = test::random_floats(size_t(n_in * kMaxTok), uint32_t(n_in) + 5, 3.0f);
    const Acts a(x, n_in, kMaxTok, offset);
    for (int64_t g = 0; g < p->n_groups; ++g) {
      // The former path, one token per call: the bits every other call must reproduce.
      float base[kMaxTok][16];
      for (int t = 0; t < kMaxTok; ++t) fast(*p, g, a.rows(t, 1, false, false).data(), 1, base[t], 16);
      for (int t = 0; t < kMaxTok; ++t) {
        float r[16];
        ref(*p, g, a.rows(t, 1, false, false).data(), 1, r, 16);
        for (int i = 0; i < 16; ++i)
          ASSERT_NEAR(base[t][i], r[i], 1e-4f * (1.0f + std::fabs(r[i]))) << dtype_name(type) << " n_in " << n_in;
      }
      for (int k = 1; k <= kMaxTok; ++k)
        for (int t0 = 0; t0 + k <= kMaxTok; t0 += k)
          for (int path = 0; path < 4; ++path) {
            const bool with_zp = path >= 1, strided = path == 2 || path == 3;
            if (path == 3 && k < 2) continue;
            // path 3: strided records without zp (falls back to the sum path).
            const auto rows = a.rows(t0, k, path != 3 && with_zp, strided);
            float y[kMaxTok][16];
            fast(*p, g, rows.data(), k, y[0], 16);
            for (int t = 0; t < k; ++t)
              ASSERT_EQ(std::memcmp(y[t], base[t0 + t], sizeof y[t]), 0)
                  << dtype_name(type) << " n_in " << n_in << " group " << g << " k " << k << " token " << t0 + t
                  << " path " << path << ": " << y[t][0] << " vs " << base[t0 + t][0];
          }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, VerifyZeroPoint, ::testing::Values(DType::Q4_0, DType::Q8_0, DType::MXFP4),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// matmul() (which fills zp and lays the tokens out at one stride) gives, for every k = 1..8, the bits
// of one-token calls of the former (sum) path, on a matrix with tail rows (n_out = 37).
TEST(VerifyZeroPoint, MatmulEqualsFormerPathPerToken) {
  if (cpu::detected_isa() != Isa::Avx512) GTEST_SKIP() << "no AVX-512";
  ThreadPool pool(2);
  for (DType type : {DType::Q4_0, DType::Q8_0}) {
    const int64_t n_in = 224, n_out = 37;
    auto m = random_matrix(type, n_in, n_out, 99);
    WeightMatrix w;
    w.type = type;
    w.n_in = n_in;
    w.n_out = n_out;
    w.row_stride = row_bytes(type, n_in);
    w.data = m.data();
    pack_for_matmul(w);
    ASSERT_TRUE(w.packed);
    const auto x = test::random_floats(size_t(n_in * 8), 17, 2.0f);
    const Acts a(x, n_in, 8, cpu::packed_zero_point(type));
    const cpu::PackedDotFn fast = cpu::packed_dot_avx512(type);
    for (int k = 1; k <= 8; ++k) {
      std::vector<float> y(size_t(k * n_out));
      matmul(w, x.data(), y.data(), k, pool);
      for (int t = 0; t < k; ++t)
        for (int64_t g = 0; g < w.packed->n_groups; ++g) {
          float r[16];
          fast(*w.packed, g, a.rows(t, 1, false, false).data(), 1, r, 16);
          ASSERT_EQ(std::memcmp(r, y.data() + t * n_out + g * 16, sizeof r), 0)
              << dtype_name(type) << " k " << k << " token " << t << " group " << g;
        }
    }
  }
}

// q4_K: the strided kernel (tokens at one stride with ActRow::bsp, the mins term from bsp) gives the
// bits of the former kernel (a pointer per token, the mins from bsums), at every width, for n_in of 1,
// 3 and 9 super-blocks.
TEST(VerifyZeroPoint, Q4KStridedKernelEqualsFormerKernel) {
  if (cpu::detected_isa() != Isa::Avx512) GTEST_SKIP() << "no AVX-512";
  const cpu::PackedDotFn fast = cpu::packed_dot_avx512(DType::Q4_K);
  ASSERT_NE(fast, nullptr);
  constexpr int kMaxTok = 8;
  for (int64_t n_in : {256, 768, 2304}) {
    const int64_t n_out = 48, nb = n_in / 256;
    const auto m = random_matrix(DType::Q4_K, n_in, n_out, uint32_t(n_in) + 3);
    const auto p = cpu::pack_matrix(DType::Q4_K, m.data(), n_in, n_out, row_bytes(DType::Q4_K, n_in));
    ASSERT_TRUE(p);
    const auto x = test::random_floats(size_t(n_in * kMaxTok), uint32_t(n_in) + 11, 3.0f);
    // Record per token: qs [n_in] | d [nb] f32 | bsums [n_in / 16] i16 | bsp [nb][8] i16 | padding.
    const size_t off_d = size_t(n_in), off_bs = off_d + size_t(nb) * 4, off_bsp = off_bs + size_t(n_in / 16) * 2;
    const size_t stride = off_bsp + size_t(nb) * 16 + 36;
    std::vector<uint8_t> buf(stride * kMaxTok);
    std::vector<ActRow> plain(kMaxTok), strided(kMaxTok);
    for (int t = 0; t < kMaxTok; ++t) {
      uint8_t* r = buf.data() + size_t(t) * stride;
      auto* qs = reinterpret_cast<int8_t*>(r);
      auto* d = reinterpret_cast<float*>(r + off_d);
      auto* bs = reinterpret_cast<int16_t*>(r + off_bs);
      auto* bp = reinterpret_cast<int16_t*>(r + off_bsp);
      cpu::quantize_act_q8_K(x.data() + t * n_in, n_in, qs, d, bs);
      const int order[8] = {0, 2, 1, 3, 4, 6, 5, 7};
      for (int64_t b = 0; b < nb; ++b)
        for (int i = 0; i < 8; ++i) {
          const int j = order[i];
          bp[b * 8 + i] = int16_t(bs[b * 16 + 2 * j] + bs[b * 16 + 2 * j + 1]);
        }
      plain[size_t(t)].qs = strided[size_t(t)].qs = qs;
      plain[size_t(t)].d = strided[size_t(t)].d = d;
      plain[size_t(t)].bsums = strided[size_t(t)].bsums = bs;
      strided[size_t(t)].bsp = reinterpret_cast<const int32_t*>(bp);
    }
    for (int64_t g = 0; g < p->n_groups; ++g) {
      float base[kMaxTok][16];
      for (int t = 0; t < kMaxTok; ++t) fast(*p, g, &plain[size_t(t)], 1, base[t], 16);
      for (int k = 1; k <= kMaxTok; ++k)
        for (int t0 = 0; t0 + k <= kMaxTok; ++t0) {
          float y[kMaxTok][16];
          fast(*p, g, &strided[size_t(t0)], k, y[0], 16);
          for (int t = 0; t < k; ++t)
            ASSERT_EQ(std::memcmp(y[t], base[t0 + t], sizeof y[t]), 0)
                << "q4_K n_in " << n_in << " group " << g << " k " << k << " token " << t0 + t << ": " << y[t][0]
                << " vs " << base[t0 + t][0];
        }
    }
  }
}

// matmul() on q4_K (bsp filled, strided kernel) gives every token the bits of its one-token call of
// the former kernel, for k = 1..8, with tail rows.
TEST(VerifyZeroPoint, Q4KMatmulEqualsFormerKernelPerToken) {
  if (cpu::detected_isa() != Isa::Avx512) GTEST_SKIP() << "no AVX-512";
  ThreadPool pool(2);
  const int64_t n_in = 512, n_out = 35;
  auto m = random_matrix(DType::Q4_K, n_in, n_out, 5);
  WeightMatrix w;
  w.type = DType::Q4_K;
  w.n_in = n_in;
  w.n_out = n_out;
  w.row_stride = row_bytes(DType::Q4_K, n_in);
  w.data = m.data();
  pack_for_matmul(w);
  ASSERT_TRUE(w.packed);
  const auto x = test::random_floats(size_t(n_in * 8), 23, 2.0f);
  const cpu::PackedDotFn fast = cpu::packed_dot_avx512(DType::Q4_K);
  for (int k = 1; k <= 8; ++k) {
    std::vector<float> y(size_t(k * n_out));
    matmul(w, x.data(), y.data(), k, pool);
    for (int t = 0; t < k; ++t) {
      std::vector<int8_t> qs(static_cast<size_t>(n_in));
      std::vector<float> d(size_t(n_in / 256));
      std::vector<int16_t> bs(size_t(n_in / 16));
      cpu::quantize_act_q8_K(x.data() + t * n_in, n_in, qs.data(), d.data(), bs.data());
      ActRow a;
      a.qs = qs.data();
      a.d = d.data();
      a.bsums = bs.data();
      for (int64_t g = 0; g < w.packed->n_groups; ++g) {
        float r[16];
        fast(*w.packed, g, &a, 1, r, 16);
        ASSERT_EQ(std::memcmp(r, y.data() + t * n_out + g * 16, sizeof r), 0) << "q4_K k " << k << " token " << t << " group " << g;
      }
    }
  }
}

}  // namespace
}  // namespace polykv
