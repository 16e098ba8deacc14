// Internal to the CUDA matmul (matmul_cuda.cu: mat-vec kernels and activations; matmul_cuda_prefill.cu:
// the tensor-core path and dequantization). Not a public interface.
#pragma once
#include <cstdint>

#include "backend/cpu/matmul.h"
#include "backend/cuda/cuda_context.h"
#include "backend/cuda/matmul_cuda_dot.cuh"

namespace polykv::cuda {

// Throws Error unless w is a matrix these kernels take (type, shape, alignment of the rows).
void validate_device_weights(const WeightMatrix& w);

// Activations of n columns in the form the mat-vec kernels of w's type read, in ctx's MatmulActs
// scratch: quantized weights: qs [n][n_in] int8 + s [n][n_in / 32]; float weights: xf [n][ldx] f32,
// zero-padded to ldx = n_in rounded up to 8.
struct ActView {
  const int8_t* qs = nullptr;
  const hd::ActScale* s = nullptr;
  const float* xf = nullptr;
  int64_t ldx = 0;
};
ActView prepare_acts(const WeightMatrix& w, const float* x, int n, CudaContext& ctx);

// y[col0 + c][o] for c < ncols (1..8) and every row o; y: [*][w.n_out].
void launch_matvec(const WeightMatrix& w, const ActView& a, int col0, int ncols, float* y, cudaStream_t s);

// Tests only: the bound of the tensor-core path's dequantized tile (0: the default, 64 MiB), so that
// small matrices run in several tiles. Not thread-safe; set it while no matmul runs.
void set_prefill_tile_bytes(size_t bytes);

// True for f32 / f16 / bf16 weights.
bool is_float_weight(DType t);

}  // namespace polykv::cuda
