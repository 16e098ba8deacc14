// Fused decoder ops on the GPU: one kernel where the decoder issues two, with the same per-element
// arithmetic (ops_cuda_math.cuh) in the same order, so each gives the bits of the two plain ops of
// ops_cuda.h one after the other (tests/cuda/ops_fused_cuda_test.cpp checks it).
#pragma once
#include <cstdint>

#include <cstddef>

#include "core/layer_kinds.h"
#include "backend/cuda/cuda_context.h"
#include "kv/kv_type.h"

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
// With kv.k_base set it also stores the rows' K heads (as rotated) and V heads into the KV pool: the bytes kv_store
// writes (kv_cuda.h's layout: head g of a row at slot = block * block_tokens + offset goes to base + block *
// block_stride + (g * block_tokens + offset) * head bytes; a slot < 0 is a padding row), one warp a head, in the
// same launch (V heads: blocks of their own after k's). Plain K and V types only (qk_norm_rope_store_ok).
struct HeadKvStore {
  uint8_t* k_base = nullptr;  // the layer's K part of block 0; null: no store
  uint8_t* v_base = nullptr;  // its V part
  size_t block_stride = 0;
  size_t k_head_bytes = 0, v_head_bytes = 0;
  int block_tokens = 0, head_dim_v = 0;
  KvType k_type = KvType::F16, v_type = KvType::F16;
  const float* v = nullptr;        // device [rows][n_head_kv][head_dim_v] f32
  const int32_t* slots = nullptr;  // device [rows]
};
bool qk_norm_rope_ok(int head_dim);  // head_dim <= 2048 (the one-block rmsnorm's rows in registers)
// K and V types the fused store takes (f32, f16, bf16, q8_0, q4_0), head_dim_v <= 2048.
bool qk_norm_rope_store_ok(KvType k_type, KvType v_type, int head_dim_v);
void qk_norm_rope(float* q, const float* q_norm, int n_head, float* k, const float* k_norm, int n_head_kv, int rows,
                  int head_dim, float eps, int n_rot, const int32_t* pos, const float* inv_freq, float scale,
                  RopeStyle style, cudaStream_t s, bool pdl = false, const HeadKvStore& kv = {});

}  // namespace polykv::cuda
