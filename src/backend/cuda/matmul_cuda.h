// Matrix multiplication on the GPU with weights in their stored GGUF/ggml type (device copies of
// the rows, same layout and row_stride as on the host).
//   y[t][o] = sum_i W[o][i] * x[t][i];  W: [n_out][n_in], x: [n][n_in] f32, y: [n][n_out] f32.
// n <= 8: mat-vec kernels reading each weight byte once for all n columns (decode, speculative
// verification); larger n: prefill, through tensor cores (dequantized tiles + cuBLAS, or own kernels).
// Every weight type of core/dtype.h that the CPU backend's matmul takes is supported.
#pragma once
#include <cstdint>

#include "backend/cpu/matmul.h"
#include "backend/cuda/cuda_context.h"

namespace polykv::cuda {

// w.data: device pointer. x, y: device pointers.
void matmul(const WeightMatrix& w, const float* x, float* y, int n, CudaContext& ctx);

// The mat-vec path alone (n in 1..8), for tests and benchmarks.
void matvec(const WeightMatrix& w, const float* x, float* y, int n, cudaStream_t stream);

// dst[i][:] = dequantize(row rows[i] of w) * scale, i < n; rows: device [n]; dst: device [n][w.n_in].
// (token embeddings)
void dequantize_rows(const WeightMatrix& w, const int32_t* rows, int n, float scale, float* dst, cudaStream_t stream);

}  // namespace polykv::cuda
