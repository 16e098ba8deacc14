// The v2 expert mat-vec's arithmetic (backend/cuda/moe_cuda_v2.cuh) on the CPU (runs in CI): the
// kernel's lane walk emulated lane by lane (units lane, lane + 32, ... of R rows loaded from split rows
// with the chunking of loads of the kernel, hd::moe_split_unit on gathered activation rows, the warp
// butterfly) gives, bit for bit, what the existing mat-vec emulation gives on the ggml rows for the
// same columns (the v1 kernels' bits), for q4_0, q8_0, q4_K and q6_K, awkward n_in / n_out and 1..8
// gathered columns, and stays within the 8-bit activations' rigorous bound of the exact dot.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cuda/moe_cuda_v2.cuh"
#include "cuda/matmul_cuda_test_util.h"

namespace polykv {
namespace {

using cuda_test::make_weights;

// Emulation of moe_split_matvec_kernel for one expert (split rows `split`, stride `stride`) and the
// gathered activation rows arow[0..ncols) of a (columns past ncols repeat the last). Returns
// y [ncols][n_out].
template <class T, int NC>
std::vector<float> emulate_v2(const std::vector<uint8_t>& split, size_t stride, int64_t n_in, int64_t n_out,
                              const cuda_test::QuantActs& a, const std::vector<int64_t>& cols) {
  using Cfg = cuda::hd::MoeSplitCfg<T, NC>;
  using S = cuda::hd::Split<T>;
  constexpr int R = Cfg::kR, U = Cfg::kU, QW = S::kUnitWords, HW = S::kHeadWords;
  const auto geom = cuda::hd::split_geom<T>(n_in);
  const int ncols = int(cols.size());
  std::vector<float> y(size_t(ncols) * size_t(n_out), NAN);
  int64_t arow[NC];
  for (int c = 0; c < NC; ++c) arow[c] = cols[size_t(std::min(c, ncols - 1))];
  const int64_t n_steps = (geom.n_units + 31) / 32;
  for (int64_t row0 = 0; row0 < n_out; row0 += R) {
    const int nrows = int(std::min<int64_t>(R, n_out - row0));
    const uint8_t* rows[R];
    for (int r = 0; r < R; ++r) rows[r] = split.data() + size_t(row0 + std::min(r, nrows - 1)) * stride;
    std::vector<float> lanes(size_t(32 * R * NC));
    for (int lane = 0; lane < 32; ++lane) {
      float acc[R][NC] = {};
      for (int64_t j0 = 0; j0 < n_steps; j0 += U) {
        uint32_t q[U][R][QW], h[U][R][HW];
        for (int k = 0; k < U; ++k)
          for (int r = 0; r < R; ++r) {
            const int64_t u = 32 * (j0 + k) + lane;
            if (u < geom.n_units && r < nrows) {
              cuda::hd::split_load_unit<T>(rows[r], geom, u, q[k][r], h[k][r]);
            } else {
              std::memset(q[k][r], 0, sizeof(q[k][r]));
              std::memset(h[k][r], 0, sizeof(h[k][r]));
            }
          }
        for (int k = 0; k < U; ++k) {
          const int64_t u = 32 * (j0 + k) + lane;
          if (u < geom.n_units) cuda::hd::moe_split_unit<T, NC, R>(q[k], h[k], u, a.qs.data(), a.s.data(), n_in, arow, acc);
        }
      }
      for (int r = 0; r < R; ++r)
        for (int c = 0; c < NC; ++c) lanes[size_t((r * NC + c) * 32 + lane)] = acc[r][c];
    }
    for (int r = 0; r < nrows; ++r)
      for (int c = 0; c < ncols; ++c) {
        float v[32];
        for (int l = 0; l < 32; ++l) v[l] = lanes[size_t((r * NC + c) * 32 + l)];
        y[size_t(c) * size_t(n_out) + size_t(row0 + r)] = cuda::hd::warp_sum_emulated(v);
      }
  }
  return y;
}

template <int NC>
void check_type(DType t, int64_t n_in, int64_t n_out, int ncols, uint32_t seed) {
  SCOPED_TRACE(std::string(dtype_name(t)) + " n_in " + std::to_string(n_in) + " n_out " + std::to_string(n_out) +
               " ncols " + std::to_string(ncols) + " NC " + std::to_string(NC));
  const auto w = make_weights(t, n_in, n_out, seed, true);
  // 9 activation rows; the item gathers ncols of them in a scrambled order (as perm does).
  const int64_t n_rows = 9;
  const auto x = cuda_test::normal_floats(size_t(n_rows * n_in), seed + 1, 1.0f);
  const auto a = cuda_test::quantize_acts(x, n_in, n_rows);
  std::vector<int64_t> cols;
  for (int c = 0; c < ncols; ++c) cols.push_back((5 * c + 3) % n_rows);
  ASSERT_TRUE(cuda::hd::visit_split_decoder(t, [&](auto dec) {
    using T = decltype(dec);
    const auto g = cuda::hd::split_geom<T>(n_in);
    std::vector<uint8_t> split(g.row_bytes * size_t(n_out));
    cuda::hd::split_pack_rows<T>(static_cast<const uint8_t*>(w.m.data), w.m.row_stride, n_in, n_out, split.data());
    const auto got = emulate_v2<T, NC>(split, g.row_bytes, n_in, n_out, a, cols);
    // The v1 bits: the existing mat-vec emulation on the ggml rows, one gathered column at a time.
    for (int c = 0; c < ncols; ++c) {
      const std::vector<float> xc(x.begin() + cols[size_t(c)] * n_in, x.begin() + (cols[size_t(c)] + 1) * n_in);
      const auto want = cuda_test::emulate_matvec<1>(w.m, xc, 1);
      const auto ref = cuda_test::reference(w.m, xc, 1);
      for (int64_t o = 0; o < n_out; ++o) {
        const float gv = got[size_t(c) * size_t(n_out) + size_t(o)], wv = want[size_t(o)];
        ASSERT_EQ(std::memcmp(&gv, &wv, 4), 0) << "column " << c << " row " << o << ": v2 " << gv << " v1 " << wv;
        // The exact dot with 8-bit activations: only float rounding apart (1e-4 of Σ|w x| is generous).
        ASSERT_LE(std::fabs(double(gv) - ref.exact_q[size_t(o)]), 1e-4 * ref.abs_dot[size_t(o)] + 1e-6)
            << "column " << c << " row " << o << ": " << gv << " vs exact " << ref.exact_q[size_t(o)];
      }
    }
  })) << dtype_name(t);
}

TEST(MoeCudaV2Host, SplitMatvecIsTheV1BitsOnGatheredColumns) {
  uint32_t seed = 500;
  for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q6_K}) {
    const int64_t bs = dtype_info(t).block_size;
    // 768 = qwen3-30b-a3b's expert n_ff (24 units of q4_0: lanes 24..31 idle); 2048 its n_embd.
    for (int64_t n_in : {bs, 3 * bs, int64_t(768) / bs * bs, int64_t(2048), 33 * bs}) {
      if (n_in % bs || n_in % 32) continue;
      for (int64_t n_out : {int64_t(1), int64_t(7), int64_t(13)}) {
        check_type<1>(t, n_in, n_out, 1, ++seed);
        check_type<2>(t, n_in, n_out, 2, ++seed);
        check_type<4>(t, n_in, n_out, 3, ++seed);
        check_type<8>(t, n_in, n_out, 8, ++seed);
        check_type<8>(t, n_in, n_out, 5, ++seed);
      }
    }
  }
}

TEST(MoeCudaV2Host, ConfigKeepsEightLoadsInFlightForOneColumn) {
  // The kernel issues U x R x loads-per-unit 16-byte loads per lane before using them.
  using namespace cuda::hd;
  EXPECT_EQ((MoeSplitCfg<DecQ4_0, 1>::kU * MoeSplitCfg<DecQ4_0, 1>::kR * Split<DecQ4_0>::kLoadsPerUnit), 8);
  EXPECT_EQ((MoeSplitCfg<DecQ8_0, 1>::kU * MoeSplitCfg<DecQ8_0, 1>::kR * Split<DecQ8_0>::kLoadsPerUnit), 8);
  EXPECT_GE((MoeSplitCfg<DecQ4_K, 8>::kU), 1);
  EXPECT_EQ(moe_split_groups(768, 4), 192);
  EXPECT_EQ(moe_split_groups(7, 4), 2);
}

}  // namespace
}  // namespace polykv
