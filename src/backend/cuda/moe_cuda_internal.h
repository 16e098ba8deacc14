// Internal to the CUDA mixture-of-experts ops (moe_cuda.cu orchestrates; moe_cuda_v2.cu holds the
// kernels for experts in the split layout). Not a public interface.
#pragma once
#include <cstddef>
#include <cstdint>

#include "backend/cuda/matmul_cuda_dot.cuh"
#include "backend/cuda/moe_cuda.h"
#include "backend/cuda/moe_cuda_hd.cuh"

namespace polykv::cuda {

// One launch over up to two matrices of the same shape and type (gate and up; or down alone): part
// p's expert e rows at base[p] + e * expert_stride. Item it's column c is slot perm[it.first + c];
// its activations are row slot / col_div of xq/xs (quantized), xf (float) or x16 (f16, the mma
// path); y[p][slot][n_out] (+ bias[p][expert][row] when bias[p]).
struct MoeMatArgs {
  const uint8_t* base[2];
  const float* bias[2];  // [n_expert][n_out] or nullptr
  float* y[2];
  int n_parts;
  size_t expert_stride, row_stride;
  int64_t n_out, n_in;
  const int8_t* xq;
  const hd::ActScale* xs;
  const float* xf;
  const void* x16;  // __half [*][n_in] (mma path)
  int64_t ldx;
  const int32_t* perm;
  const hd::MoeItem* items;
  const int32_t* n_items;
  int col_div;
  // v2 mat-vec, one-token steps (n = 1): the items are the k slots themselves (item j = expert
  // direct_ids[j], slot j; no grouping kernel); an expert outside [0, n_expert) leaves its slot
  // unwritten (the slot sum makes the row NaN). nullptr: items / perm.
  const int32_t* direct_ids;
  int n_expert;
};

// The split-layout mat-vec (v2) of stack st over up to max_items items of at most `width` (1, 2, 4
// or 8) columns; a's geometry fields are filled from st. st.layout must be CudaSplit.
void launch_moe_split_matvec(const ExpertStack& st, MoeMatArgs a, int64_t max_items, int width, cudaStream_t s);

// The split-layout mat-mul on tensor cores (v2, many tokens per expert): items of up to
// kMoeMmaCols columns, activations a.x16. st.layout must be CudaSplit.
constexpr int kMoeMmaCols = 64;
void launch_moe_split_mma(const ExpertStack& st, MoeMatArgs a, int64_t max_items, cudaStream_t s);

// h16[i] = act(g[i], u[i]) rounded to f16, i < total (the mma path's down activations).
void launch_moe_act_f16(const float* g, const float* u, int64_t total, bool clamped, float alpha, float limit,
                        void* h16, cudaStream_t s);

#if defined(__CUDACC__)
// The v2 mat-vec's butterfly: every lane gets the warp's sum (a fixed xor order, so every kernel that uses it
// gets the same bits for the same partial sums).
__device__ __forceinline__ float moe_warp_sum(float v) { return hd::warp_sum(v); }

__device__ inline float route_weight_warp(const float* l, int ne, int k, bool all_softmax, int lane, float my_v);

// The routing of one row by one warp (moe_route_kernel, and the fused one-token path's gate+up blocks): k
// rounds, round j's pick the best expert strictly after pick j - 1 in routing order (moe_cuda_hd.cuh); lane
// j < k gets pick j's index and weight (others: -1 / 0). Every lane must call it.
__device__ inline void route_row_warp(const float* l, int ne, int k, bool all_softmax, int lane, int& out_i,
                                      float& out_w) {
  // Up to 8 experts per lane stay in registers (ne <= 256): each round's search reads no memory. Larger
  // ne reads l in every round (route_lane_best). Either way the lane's candidates and the order are
  // route_lane_best's, so the picks are the same.
  constexpr int kRegs = 8;
  const bool in_regs = ne <= 32 * kRegs;
  float lv[kRegs];
#pragma unroll
  for (int c = 0; c < kRegs; ++c) {
    const int e = lane + 32 * c;
    lv[c] = in_regs && e < ne ? l[e] : 0.0f;
  }
  float pv = 0.0f, my_v = 0.0f;
  int pi = -1, my_i = -1;
  for (int j = 0; j < k; ++j) {
    float v = 0.0f;
    int i = -1;
    if (in_regs) {
#pragma unroll
      for (int c = 0; c < kRegs; ++c) {
        const int e = lane + 32 * c;
        if (e >= ne) continue;
        const float x = lv[c];
        if (pi >= 0 && !hd::route_before(pv, pi, x, e)) continue;  // at or before the previous pick
        if (hd::route_before(x, e, v, i)) {
          i = e;
          v = x;
        }
      }
    } else {
      i = hd::route_lane_best(l, ne, lane, pv, pi, v);
    }
#pragma unroll
    for (int off = 16; off > 0; off /= 2) {  // the best of the warp: a strict total order, one winner
      const float ov = __shfl_xor_sync(0xffffffffu, v, off);
      const int oi = __shfl_xor_sync(0xffffffffu, i, off);
      if (hd::route_before(ov, oi, v, i)) {
        v = ov;
        i = oi;
      }
    }
    if (lane == j) {
      my_v = v;
      my_i = i;
    }
    pv = v;
    pi = i;
  }
  out_i = my_i;
  out_w = route_weight_warp(l, ne, k, all_softmax, lane, my_v);
}

// The second half of the routing of one row by one warp: lane j < k holds pick j's logit my_v (others 0), and
// gets pick j's weight (others: 0). Every lane must call it.
__device__ inline float route_weight_warp(const float* l, int ne, int k, bool all_softmax, int lane, float my_v) {
  // mx = pick 0's logit; the chosen exps are summed in slot order (lane j holds exp of pick j).
  const double mx = double(__shfl_sync(0xffffffffu, my_v, 0));
  const double my_e = hd::route_exp(my_v, mx);
  double sum = 0.0;
  for (int j = 0; j < k; ++j) sum += __shfl_sync(0xffffffffu, my_e, j);
  if (all_softmax) {
    double s = 0.0;
    for (int e = lane; e < ne; e += 32) s += hd::route_exp(l[e], mx);
#pragma unroll
    for (int off = 16; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
    sum = s;
  }
  return lane < k ? hd::route_weight(my_v, mx, sum) : 0.0f;
}

// The picks of one row by a whole block of kThreads threads, by rank: expert i's rank is the number of experts
// before it in routing order (route_before: the larger logit, then the smaller index), and pick j is the expert
// of rank j, which is what route_row_warp's round j finds when that order is total, i.e. without NaN logits.
// l_s: the row's ne <= kThreads logits in shared memory; pick_i / pick_v [k] (shared) get the picks' indices and
// logits. Ends with a barrier. Returns whether a logit is NaN; then nothing is written (the order is not total:
// route_row_warp's sequential rounds decide, as they always did). Every thread of the block must call it.
// P = 1, 2, 4 or 8 adjacent threads count one expert's rank, each over its share of the row.
template <int kThreads>
__device__ inline bool route_block_picks(const float* l_s, int ne, int k, int* pick_i, float* pick_v) {
  const int P = hd::route_rank_parts(ne, kThreads);
  const int t = int(threadIdx.x), i = t / P, part = t % P;
  int rank = 0;
  bool nan = false;
  if (i < ne) {
    const float v = l_s[i];
    nan = !(v == v);
    const int chunk = hd::route_rank_chunk(ne, P), lo = min(part * chunk, ne), hi = min(lo + chunk, ne);
    rank = hd::route_rank_share(l_s, lo, hi, i, v);
  }
  for (int off = 1; off < P; off *= 2) rank += __shfl_xor_sync(0xffffffffu, rank, off);
  if (i < ne && part == 0 && rank < k) {
    pick_i[rank] = i;
    pick_v[rank] = l_s[i];
  }
  return __syncthreads_or(nan ? 1 : 0) != 0;
}
#endif

// The one-token FFN (n = 1, every stack split, quantized experts) in two launches (moe_cuda_decode.cu):
// gate+up with the activation and its 8-bit quantization, then down with the slot sum. The same bits
// as the five kernels of the direct v2 path. POLYKV_CUDA_MOE_FUSED=0 (or set_moe_decode_fused(0)) runs
// those instead.
constexpr int kMoeDecodeMaxSlots = 16;  // k (experts per token) the fused path takes
// The widest x whose 8-bit blocks the gate+up launch copies (MoeDecodeArgs::xq_in: 2 words of 16 bytes a thread).
constexpr int64_t kMoeXActsMaxEmbd = 2 * 256 * 16;
struct MoeDecodeArgs {
  const float* x = nullptr;          // [n_embd]
  // x's 8-bit activation blocks written by the op before (MoeXActs), or nullptr: gate+up quantizes x itself.
  const int8_t* xq_in = nullptr;          // [n_embd]
  const hd::ActScale* xs_in = nullptr;    // [n_embd / 32]
  const int32_t* ids = nullptr;      // [k]
  const float* weights = nullptr;    // [k]
  const float* gate_bias = nullptr;  // [n_expert][n_ff] or nullptr
  const float* up_bias = nullptr;
  const float* down_bias = nullptr;  // [n_expert][n_embd] or nullptr
  bool clamped = false;
  float alpha = 0.0f, limit = 0.0f;
  int8_t* hq = nullptr;              // [k][n_ff]: the down mat-vec's 8-bit activations (scratch)
  hd::ActScale* hs = nullptr;        // [k][n_ff / 32]
  float* out = nullptr;              // [n_embd] (may alias x)
  int k = 0, n_expert = 0;
  // Routing inside the gate+up launch (moe_route_experts): logits [n_expert] (nullptr: ids / weights are
  // given); the picks are written to ids_out / weights_out (then ids / weights point there too).
  const float* logits = nullptr;
  bool all_softmax = false;
  int32_t* ids_out = nullptr;
  float* weights_out = nullptr;
  bool rank_route = false;  // the picks by ranks, block-wide (moe_rank_route_on; the same picks and weights)
  // Filled by launch_moe_decode_fused from the stacks:
  const uint8_t *gate = nullptr, *up = nullptr, *down = nullptr;
  size_t gu_expert_stride = 0, gu_row_stride = 0, down_expert_stride = 0, down_row_stride = 0;
  int64_t n_embd = 0, n_ff = 0;
};
// Whether the fused path routes inside its gate+up launch (POLYKV_CUDA_MOE_FUSED=noroute: no, the routing
// kernel runs first). Only consulted where moe_decode_fused() is true.
bool moe_route_in_launch();
// Whether the routing takes the block-wide rank form (route_block_picks) where it can: POLYKV_CUDA_MOE_RANK_ROUTE=0
// or set_moe_rank_route(0) keeps route_row_warp's rounds everywhere.
bool moe_rank_route_on();
// Whether MoeXActs are used (POLYKV_CUDA_MOE_XACTS / set_moe_x_acts), and the count behind moe_x_acts_taken.
bool moe_x_acts_on();
void note_moe_x_acts_taken();
// Whether the gate+up launch of k slots over gs's experts runs in one wave on this GPU (every block resident at
// once), the condition for routing inside it: each block routes and quantizes x before its loads, so a second
// wave pays that again on the critical path. H30 (H100): qwen3-30b-a3b (768 rows / 32 x 8 slots = 192 blocks,
// 264 resident) 1.08x with the routing inside; gpt-oss-20b (2880 / 32 x 4 = 360 blocks) 0.975x with it and the
// same as the five kernels with the routing kernel first, which it now gets (H33, H100: 1.026x against the routing
// inside). POLYKV_CUDA_MOE_ONE_WAVE=0: always inside (the rule off, for A/B).
bool moe_decode_route_fits(const ExpertStack& gs, int k, CudaContext& ctx);
bool moe_decode_fused_takes(const ExpertStack& gs, const ExpertStack& us, const ExpertStack& ds, int k);
void launch_moe_decode_fused(const ExpertStack& gs, const ExpertStack& us, const ExpertStack& ds, MoeDecodeArgs a,
                             CudaContext& ctx);

}  // namespace polykv::cuda
