// Highway probe (docs/ISA.md, "Highway or per-ISA kernels"): the AVX2 attention score tile written
// once with Google Highway (Debian libhwy-dev 1.0.3, static dispatch) against the hand-written AVX2
// kernel (attention_tile_avx2.cpp), same algorithm (2 rows x 4 keys of accumulators, FMA chains over
// the head, then horizontal sums), the same unroll pragmas, interleaved timing. Not part of the build:
//   g++ -O2 -std=c++20 -march=haswell -maes -Isrc bench/hwy_score_tile_probe.cpp build/libpolykv_lib.a \
//       -lpthread -o /tmp/hwy_probe && /tmp/hwy_probe
#include <hwy/highway.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "backend/cpu/attention_tile.h"

namespace hn = hwy::HWY_NAMESPACE;
using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;

template <int NR, int NJ>
void block_hwy(const float* k, int hd, const float* const* q, int r0, int j0, float* S, size_t s_stride) {
  const D d;
  const int n = int(hn::Lanes(d));
  V a[NR][NJ];
#pragma GCC unroll 2
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < NJ; ++j) a[r][j] = hn::Zero(d);
  for (int i = 0; i < hd; i += n) {  // hd a multiple of the lanes (the probe's shapes)
    V kv[NJ];
#pragma GCC unroll 4
    for (int j = 0; j < NJ; ++j) kv[j] = hn::LoadU(d, k + size_t(j0 + j) * size_t(hd) + i);
#pragma GCC unroll 2
    for (int r = 0; r < NR; ++r) {
      const V qv = hn::LoadU(d, q[r0 + r] + i);
#pragma GCC unroll 4
      for (int j = 0; j < NJ; ++j) a[r][j] = hn::MulAdd(qv, kv[j], a[r][j]);
    }
  }
  // Highway 1.0.3 has no multi-vector reduction: one SumOfLanes per pair (the hand kernel reduces
  // four pairs with two vhaddps rounds).
#pragma GCC unroll 2
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < NJ; ++j) S[size_t(r0 + r) * s_stride + size_t(j0 + j)] = hn::GetLane(hn::SumOfLanes(d, a[r][j]));
}

void score_tile_hwy(const float* k, int n_keys, int hd, const float* const* q, int n_rows, float* S, size_t s_stride) {
  // The probe's shapes only: n_rows even, n_keys a multiple of 4.
  for (int r0 = 0; r0 < n_rows; r0 += 2)
    for (int j0 = 0; j0 < n_keys; j0 += 4) block_hwy<2, 4>(k, hd, q, r0, j0, S, s_stride);
}

int main() {
  const int hd = 128, n_keys = 32, n_rows = 8, iters = 100000;
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  std::vector<float> k(size_t(n_keys) * hd), qv(size_t(n_rows) * hd), s1(n_rows * 32), s2(n_rows * 32);
  for (auto& x : k) x = nd(rng);
  for (auto& x : qv) x = nd(rng);
  std::vector<const float*> q;
  for (int r = 0; r < n_rows; ++r) q.push_back(qv.data() + size_t(r) * hd);
  const polykv::ScoreTileFn hand = polykv::score_tile_avx2();
  if (!hand) return 1;
  double best_hand = 1e9, best_hwy = 1e9;
  for (int rep = 0; rep < 7; ++rep) {
    for (int which = 0; which < 2; ++which) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int it = 0; it < iters; ++it) {
        if (which == 0) hand(k.data(), n_keys, hd, q.data(), n_rows, s1.data(), 32);
        else score_tile_hwy(k.data(), n_keys, hd, q.data(), n_rows, s2.data(), 32);
        asm volatile("" ::: "memory");
      }
      const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / iters;
      (which == 0 ? best_hand : best_hwy) = std::min(which == 0 ? best_hand : best_hwy, ns);
    }
  }
  double maxdiff = 0;
  for (size_t i = 0; i < s1.size(); ++i) maxdiff = std::max(maxdiff, double(std::fabs(s1[i] - s2[i])));
  std::printf("target %s: hand AVX2 %.0f ns/tile, Highway %.0f ns/tile (best of 7 x %d), max |diff| %.2g\n",
              hwy::TargetName(HWY_STATIC_TARGET), best_hand, best_hwy, iters, maxdiff);
}
