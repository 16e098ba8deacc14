// Fused decoder ops on the GPU: one kernel where the decoder issues two, with the same per-element
// arithmetic (ops_cuda_math.cuh) in the same order, so each gives the bits of the two plain ops of
// ops_cuda.h one after the other (tests/cuda/ops_fused_cuda_test.cpp checks it).
#pragma once
#include <cstdint>

#include "core/layer_kinds.h"
#include "backend/cuda/cuda_context.h"

namespace polykv::cuda {

// x += r; out = rmsnorm(x) * w (the plain add then rmsnorm). x, r, out: [rows][cols]; out may alias r
// (or x).
// pdl (see matmul_cuda.h's pdl_enabled): launched with programmatic dependent launch; the kernels wait
// for the kernel before them before they touch memory, so results never depend on it.
void add_rmsnorm(float* x, const float* r, const float* w, float* out, int rows, int cols, float eps,
                 cudaStream_t s, bool pdl = false);

// rope(q, rows, n_head, ...) and rope(k, rows, n_head_kv, ...) (same positions and frequencies) in one
// launch. q: [rows][n_head][head_dim], k: [rows][n_head_kv][head_dim]; they must not overlap.
void rope_qk(float* q, int n_head, float* k, int n_head_kv, int rows, int head_dim, int n_rot, const int32_t* pos,
             const float* inv_freq, float scale, RopeStyle style, cudaStream_t s, bool pdl = false);

// The per-head norms of q and k, then their rope, in one launch (one block a head): rmsnorm(q, q_norm, q,
// rows * n_head, head_dim), the same of k by k_norm, then rope_qk. q_norm, k_norm: [head_dim].
bool qk_norm_rope_ok(int head_dim);  // head_dim <= 2048 (the one-block rmsnorm's rows in registers)
void qk_norm_rope(float* q, const float* q_norm, int n_head, float* k, const float* k_norm, int n_head_kv, int rows,
                  int head_dim, float eps, int n_rot, const int32_t* pos, const float* inv_freq, float scale,
                  RopeStyle style, cudaStream_t s, bool pdl = false);

}  // namespace polykv::cuda
