// Element-wise and normalization ops of the decoder on the GPU (f32 rows, device pointers), the
// twins of backend/cpu/ops.h.
#pragma once
#include <cstdint>

#include "core/layer_kinds.h"
#include "backend/cuda/cuda_context.h"

namespace polykv::cuda {

void rmsnorm(const float* x, const float* w, float* out, int rows, int cols, float eps, cudaStream_t s);
void add_bias(float* x, const float* b, int rows, int cols, cudaStream_t s);
void add(float* x, const float* y, int64_t n, cudaStream_t s);
void rope(float* x, int rows, int n_heads, int head_dim, int n_rot, const int32_t* pos, const float* inv_freq,
          float scale, RopeStyle style, cudaStream_t s);
void gated_activation(float* gate, const float* up, int64_t n, Activation act, cudaStream_t s);
void softcap(float* x, int64_t n, float cap, cudaStream_t s);
void gather_rows(const float* src, const int32_t* rows, int n, int cols, float* dst, cudaStream_t s);
// out[r] = the first maximum of row r of x [rows][cols] (core/argmax_ref.h's contract; -1 for none).
void argmax_rows(const float* x, int rows, int cols, int32_t* out, cudaStream_t s);

}  // namespace polykv::cuda
