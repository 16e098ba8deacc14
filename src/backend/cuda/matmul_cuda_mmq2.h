// The quantized mat-mul kernel on tensor cores (matmul_cuda_mmq2.cu, docs/CUDA_MMQ.md): the launcher that
// matmul_cuda_mmq.cu's entry points call. Internal.
#pragma once
#include <cuda_fp16.h>

#include <span>

#include "backend/cuda/cuda_context.h"
#include "backend/cuda/matmul_cuda.h"
#include "backend/cpu/matmul.h"

namespace polykv::cuda {

// y [n][w.n_out] = w . x16 ([n][w.n_in] f16) for mmq_supports(w); forced_splits > 0 forces the K split.
// K-split partials in ctx's MatmulWeights scratch. q4_0 / q8_0 weights are dequantized by f16
// arithmetic, the K-quants by f32 arithmetic rounded to f16 (the same f16 values either way).
void mmq2_launch(const WeightMatrix& w, const __half* x16, float* y, int n, CudaContext& ctx, int forced_splits);

// y[i] = partial[0][i] + partial[1][i] + ... in split order (i < total), on stream s: the K-split sum of
// both kernels.
void mmq2_reduce_splits(const float* partial, int splits, int64_t total, float* y, cudaStream_t s);

// The wgmma kernel (matmul_cuda_mmq3_sm90a.cu; only in builds with POLYKV_CUDA_SM90A, only for a device
// of compute capability 9.0): mmq2_launch's contract, with x permuted for w's type (xw: the
// mmq3_x_source order of matmul_cuda_mmq_stage.cuh, n columns). Shared memory: hd::mmq3_smem_bytes.
void mmq3_launch(const WeightMatrix& w, const __half* xw, float* y, int n, CudaContext& ctx, int forced_splits);
// Up to 4 parts of one type, n_in and row stride in one launch (each with the split plan it has alone, so
// each part's results are mmq3_launch's bit for bit); xw permuted for that type.
void mmq3_launch_parts(std::span<const MatvecPart> parts, const __half* xw, int n, CudaContext& ctx, int forced_splits);

}  // namespace polykv::cuda
