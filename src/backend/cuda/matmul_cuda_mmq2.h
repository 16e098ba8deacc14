// The second quantized mat-mul kernel ("mmq v2", matmul_cuda_mmq2.cu; docs/CUDA_MMQ.md): the same
// fragments and f16 values as v1, fed from a cp.async ring in shared memory. Selected by
// POLYKV_CUDA_MMQ_KERNEL=v2 (v3: with f16 dequantization of q4_0 / q8_0) or cuda::set_mmq_kernel(2 / 3)
// (matmul_cuda.h). Internal.
#pragma once
#include <cuda_fp16.h>

#include "backend/cuda/cuda_context.h"
#include "backend/cpu/matmul.h"

namespace polykv::cuda {

// y [n][w.n_out] = w . x16 ([n][w.n_in] f16) for mmq_supports(w); forced_splits > 0 forces the K split.
// K-split partials in ctx's MatmulWeights scratch. half_dequant (kernel v3): q4_0 / q8_0 weights are
// dequantized by f16 arithmetic (same values; other types ignore it). sixteen_warps (kernel v4): v3 with
// 16 warps of one m16 tile per CTA (same 256 rows, twice the warps per SM, half the accumulators).
void mmq2_launch(const WeightMatrix& w, const __half* x16, float* y, int n, CudaContext& ctx, int forced_splits,
                 bool half_dequant, bool sixteen_warps = false);

}  // namespace polykv::cuda
