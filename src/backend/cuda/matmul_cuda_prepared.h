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

// Whether it can also take a deferred norm (DeferredNorm): prepared_matmul_ok and the split layout.
bool deferred_norm_ok(const WeightMatrix& w, int n);

// y = w · x for the x whose activations `a` holds ([n][w.n_in]); with dn.ss: y = w · x scaled per column by
// the deferred norm's inverse (every matrix deferred_norm_ok).
void matmul_prepared(const WeightMatrix& w, const ActsOut& a, float* y, int n, CudaContext& ctx,
                     const DeferredNorm& dn = {});
// matmul_parts on prepared activations (every part prepared_matmul_ok, one n_in).
void matmul_parts_prepared(std::span<const MatvecPart> parts, const ActsOut& a, int n, CudaContext& ctx,
                           const DeferredNorm& dn = {});

}  // namespace polykv::cuda
