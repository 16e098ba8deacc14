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

}  // namespace polykv::cuda
