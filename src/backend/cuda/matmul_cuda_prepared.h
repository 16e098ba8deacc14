// The mat-vec path on activations that another kernel already wrote (ops_cuda_acts.h) instead of an
// activation kernel of its own: the same mat-vec launches as matmul() / matmul_parts() for quantized
// weights and n <= kChunkedMatvecMaxCols, so the results are the same bits when the activations are.
// Host-clean (cuda_backend.cpp includes it).
#pragma once
#include <span>

#include "backend/cuda/matmul_cuda.h"
#include "backend/cuda/ops_cuda_acts.h"

namespace polykv::cuda {

// Whether matmul_prepared can take w and n columns (quantized weights, 1 <= n <= kChunkedMatvecMaxCols).
bool prepared_matmul_ok(const WeightMatrix& w, int n);

// y = w · x for the x whose activations `a` holds ([n][w.n_in]).
void matmul_prepared(const WeightMatrix& w, const ActsOut& a, float* y, int n, CudaContext& ctx);
// matmul_parts on prepared activations (every part prepared_matmul_ok, one n_in).
void matmul_parts_prepared(std::span<const MatvecPart> parts, const ActsOut& a, int n, CudaContext& ctx);

}  // namespace polykv::cuda
