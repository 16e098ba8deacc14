// The quantized mat-mul kernel on tensor cores (matmul_cuda_mmq2.cu, docs/CUDA_MMQ.md): the launcher that
// matmul_cuda_mmq.cu's entry points call. Internal.
#pragma once
#include <cuda_fp16.h>

#include "backend/cuda/cuda_context.h"
#include "backend/cpu/matmul.h"

namespace polykv::cuda {

// y [n][w.n_out] = w . x16 ([n][w.n_in] f16) for mmq_supports(w); forced_splits > 0 forces the K split.
// K-split partials in ctx's MatmulWeights scratch. q4_0 / q8_0 weights are dequantized by f16
// arithmetic, the K-quants by f32 arithmetic rounded to f16 (the same f16 values either way).
void mmq2_launch(const WeightMatrix& w, const __half* x16, float* y, int n, CudaContext& ctx, int forced_splits);

}  // namespace polykv::cuda
