// The per-element arithmetic of the CUDA mixture-of-experts ops (moe_cuda.cu), host and device (see
// matmul_cuda_hd.cuh): tests/moe_cuda_hd_test.cpp runs it on the CPU, lane by lane where the kernels
// split work over a warp, against the CPU backend's moe_route_cpu / moe_activation.
//
// Routing (one warp per row): the k picks are made in k rounds; round j's pick is the best expert
// strictly after pick j-1 in the order "larger logit first, ties: lower index" (a strict total order,
// so no set of chosen experts is needed). In a round each lane finds its best among experts lane,
// lane + 32, ... and the warp keeps the best of the 32 (any combining order gives the same winner).
// Weights are computed in double like moe_route_cpu: mx = the first pick's logit; the sum runs over
// the chosen in slot order (renormalised gatings) or over all experts (SoftmaxTopK: each lane sums
// its experts in index order, then a fixed butterfly over lanes).
#pragma once
#include <algorithm>
#include <cstdint>

#include "backend/cuda/matmul_cuda_hd.cuh"
#include "backend/moe.h"

namespace polykv::cuda::hd {

// True if expert (va, ia) comes before (vb, ib) in routing order. ib < 0: "nothing yet".
POLYKV_HD bool route_before(float va, int ia, float vb, int ib) {
  if (ib < 0) return ia >= 0;
  if (ia < 0) return false;
  return va > vb || (va == vb && ia < ib);
}

// A lane's best expert among e = lane, lane + 32, ... < ne that come strictly after (pv, pi) in
// routing order (pi < 0: no previous pick). Returns the index (-1 if none) and its logit in v.
POLYKV_HD int route_lane_best(const float* l, int ne, int lane, float pv, int pi, float& v) {
  int best = -1;
  float bv = 0.0f;
  for (int e = lane; e < ne; e += 32) {
    const float x = l[e];
    if (pi >= 0 && !route_before(pv, pi, x, e)) continue;  // at or before the previous pick
    if (route_before(x, e, bv, best)) {
      best = e;
      bv = x;
    }
  }
  v = bv;
  return best;
}

// Expert i's (logit v) rank counted over the share [lo, hi) of a row: how many experts j there come before it in
// routing order (route_before, for logits without NaN): j < i when not smaller, j > i only when larger. The sum
// over shares that cover the row is i's rank; the expert of rank j is the routing's pick j (route_block_picks).
POLYKV_HD int route_rank_share(const float* l, int lo, int hi, int i, float v) {
#ifdef __CUDA_ARCH__
  const int mid = min(max(i, lo), hi);
#else
  const int mid = std::min(std::max(i, lo), hi);
#endif
  int rank = 0;
  for (int j = lo; j < mid; ++j) rank += l[j] >= v ? 1 : 0;
  for (int j = mid; j < hi; ++j) rank += l[j] > v ? 1 : 0;
  return rank;
}

// How many adjacent threads count one expert's rank in route_block_picks (1, 2, 4 or 8: the most with ne experts
// times that many threads within a block of `threads`), and the share of the row each one counts.
POLYKV_HD int route_rank_parts(int ne, int threads) {
  int p = 1;
  while (p < 8 && ne * p * 2 <= threads) p *= 2;
  return p;
}
POLYKV_HD int route_rank_chunk(int ne, int parts) { return (ne + parts - 1) / parts; }

// exp(x - mx) in double (the same call on host and device: both are correctly rounded to within an
// ulp of double, far below the float weights' rounding).
POLYKV_HD double route_exp(float x, double mx) { return exp(double(x) - mx); }

POLYKV_HD float route_weight(float x, double mx, double sum) { return float(route_exp(x, mx) / sum); }

// The expert activation of one value (backend/moe.h MoeActivation), as moe_activation on the CPU:
// SwiGLU: g / (1 + exp(-g)) * u; SwiGLUClamped: g = min(g, limit), u = clamp(u, -limit, limit),
// (u + 1) * (g / (1 + exp(-alpha g))). (expf: the device's is within 2 ulp of the host's.)
POLYKV_HD float moe_act(float g, float u, bool clamped, float alpha, float limit) {
  if (!clamped) return fmul(g / fadd(1.0f, expf(-g)), u);
  const float gc = fminf(g, limit);
  const float uc = fminf(fmaxf(u, -limit), limit);
  return fmul(fadd(uc, 1.0f), gc / fadd(1.0f, expf(fmul(-alpha, gc))));
}

// Slot sum of one output value: o = w_0 y_0, then o += w_j y_j for j = 1 .. k-1 (slot order).
POLYKV_HD float slot_sum_step(float o, float w, float y, int j) { return j == 0 ? fmul(w, y) : fadd(o, fmul(w, y)); }

// Work items of the grouped expert kernels: each is one expert and up to `chunk` of the (token, slot)
// pairs that chose it. At most this many for n_slots pairs over n_expert experts:
// Σ_e ceil(c_e / chunk) <= Σ_e (c_e / chunk + 1) over the chosen experts.
POLYKV_HD int64_t moe_items_bound(int64_t n_slots, int n_expert, int chunk) {
  const int64_t used = n_slots < int64_t(n_expert) ? n_slots : int64_t(n_expert);
  return (n_slots + chunk - 1) / chunk + used;
}

// One work item (device memory, 16 bytes).
struct alignas(16) MoeItem {
  int32_t expert;  // which expert
  int32_t first;   // its pairs are perm[first .. first + count) (slot indices t * k + j)
  int32_t count;   // 1 .. chunk
  int32_t pad;
};

}  // namespace polykv::cuda::hd
