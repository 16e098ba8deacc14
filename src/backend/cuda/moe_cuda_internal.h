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

// The one-token FFN (n = 1, every stack split, quantized experts) in two launches (moe_cuda_decode.cu):
// gate+up with the activation and its 8-bit quantization, then down with the slot sum. The same bits
// as the five kernels of the direct v2 path. POLYKV_CUDA_MOE_FUSED=0 (or set_moe_decode_fused(0)) runs
// those instead.
constexpr int kMoeDecodeMaxSlots = 16;  // k (experts per token) the fused path takes
struct MoeDecodeArgs {
  const float* x = nullptr;          // [n_embd]
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
  // Filled by launch_moe_decode_fused from the stacks:
  const uint8_t *gate = nullptr, *up = nullptr, *down = nullptr;
  size_t gu_expert_stride = 0, gu_row_stride = 0, down_expert_stride = 0, down_row_stride = 0;
  int64_t n_embd = 0, n_ff = 0;
};
bool moe_decode_fused_takes(const ExpertStack& gs, const ExpertStack& us, const ExpertStack& ds, int k);
void launch_moe_decode_fused(const ExpertStack& gs, const ExpertStack& us, const ExpertStack& ds, MoeDecodeArgs a,
                             CudaContext& ctx);

}  // namespace polykv::cuda
