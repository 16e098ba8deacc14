// Decode mat-vecs with the small ops around them folded in (docs/CUDA_DECODE.md, "Fused output
// projections and RoPE", "The gated activation in the gate,up epilogue"): the q, k, v mat-vec with RoPE
// in its epilogue; the gate, up mat-vec with the gated activation and down's activations in its
// epilogue. (A residual add + rmsnorm folded into wo / down, and an earlier gated fold of 8 rows per
// warp, lost on the H200 and were removed 2026-12-01f; last in commit daaf86c.) Host-clean
// (cuda_backend.cpp includes it).
#pragma once
#include <span>

#include "backend/cpu/matmul.h"
#include "backend/cuda/matmul_cuda.h"
#include "backend/cuda/cuda_context.h"
#include "backend/cuda/ops_cuda_acts.h"

namespace polykv::cuda {

// The q, k, v mat-vec of one column with the RoPE of q and k (Norm style: adjacent pairs) in its
// epilogue (Backend::matmul_qkv_rope on the GPU): qkv = {q, k, v}, one launch instead of the mat-vec
// and rope_qk; the bits of matmul_parts, then rope_qk (rows = 1, at position pos[0]).
// matmul_qkv_rope_ok: the three are split with one type, n_in and stride, q's and k's rows whole heads,
// head_dim and n_rot even, n_rot <= head_dim; prepared_matmul_ok for one column.
bool matmul_qkv_rope_ok(std::span<const MatvecPart> qkv, int head_dim, int n_rot);
// x's activations: `prepared` when not null, else computed here. pos: device [1]; inv_freq: device [n_rot / 2].
void matmul_qkv_rope(std::span<const MatvecPart> qkv, const float* x, const ActsOut* prepared, int head_dim, int n_rot,
                     const int32_t* pos, const float* inv_freq, float scale, CudaContext& ctx);

// gate = act(gate_w · x) * (up_w · x), up = up_w · x for one column, and down's activations of gate
// into `down_acts` (which must not be x's prepared activations: ctx's GatedActs slot), in one launch:
// the bits of matmul_parts, gated_activation_acts. matmul_gated_ok: both split with one type, n_in and
// stride, n_ff (their rows) a multiple of 32, prepared_matmul_ok for one column.
bool matmul_gated_ok(const WeightMatrix& gate_w, const WeightMatrix& up_w);
// x's activations: `prepared` when not null, else computed here.
void matmul_gated(const WeightMatrix& gate_w, const WeightMatrix& up_w, const float* x, const ActsOut* prepared,
                  float* gate, float* up, Activation act, const ActsOut& down_acts, CudaContext& ctx);

}  // namespace polykv::cuda
