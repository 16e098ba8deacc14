// Decode mat-vecs with the small ops around them folded in (docs/CUDA_DECODE.md, "Fused output
// projections and RoPE"): the q, k, v mat-vec with RoPE in its epilogue. (The residual add + rmsnorm
// folded into wo / down and the gated activation folded into gate, up lost on the H200 and were removed
// 2026-12-01f; last in commit daaf86c. A second gated fold with per-activation-block arrival counters lost
// too, 0.91-0.94x, and was removed 2026-12-03; last in commit 157fb92; docs/CUDA_DECODE.md.) Host-clean
// (cuda_backend.cpp includes it).
#pragma once
#include <array>
#include <span>

#include "backend/cpu/matmul.h"
#include "backend/cuda/matmul_cuda.h"
#include "backend/cuda/cuda_context.h"
#include "backend/cuda/ops_cuda_acts.h"

namespace polykv::cuda {

// The q, k, v mat-vec of one column with the biases of q, k and v and the RoPE of q and k (Norm or Neox style) in
// its epilogue (Backend::matmul_qkv_rope on the GPU): qkv = {q, k, v}, one launch instead of the mat-vec, three
// add_bias and rope_qk; the bits of matmul_parts, then add_bias, then rope_qk (rows = 1, at position pos[0]).
// matmul_qkv_rope_ok: the three are split with one n_in, q and k with one type and stride, v with theirs or in a
// two-type pair (matmul_cuda_internal.h: the K-quant mixes' v in q6_K or q5_K), q's and k's rows whole heads,
// head_dim and n_rot even, n_rot <= head_dim; prepared_matmul_ok for one column.
bool matmul_qkv_rope_ok(std::span<const MatvecPart> qkv, int head_dim, int n_rot);
// x's activations: `prepared` when not null, else computed here. pos: device [1]; inv_freq: device [n_rot / 2].
// bias: device, q's, k's and v's, or all null. dn: a norm deferred into it (with prepared only), applied before
// the biases.
void matmul_qkv_rope(std::span<const MatvecPart> qkv, const float* x, const ActsOut* prepared, int head_dim, int n_rot,
                     const int32_t* pos, const float* inv_freq, float scale, RopeStyle style,
                     const std::array<const float*, 3>& bias, CudaContext& ctx, const DeferredNorm& dn = {});

}  // namespace polykv::cuda
