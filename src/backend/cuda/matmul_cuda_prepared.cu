// The mat-vec path on prepared activations (matmul_cuda_prepared.h): what matmul() and matmul_parts()
// launch after their own prepare_acts, column chunks of kMatvecMaxCols included.
#include "backend/cuda/matmul_cuda_prepared.h"

#include <algorithm>

#include "backend/cuda/matmul_cuda_internal.h"
#include "core/error.h"

namespace polykv::cuda {
namespace {

ActView view_of(const ActsOut& o, const DeferredNorm& dn) {
  ActView v;
  v.qs = o.qs;
  v.s = static_cast<const hd::ActScale*>(o.scales);
  v.dn = dn;
  return v;
}

}  // namespace

bool prepared_matmul_ok(const WeightMatrix& w, int n) {
  // Not where matmul() takes the mmq path (f16 activations): the prepared 8-bit ones would differ.
  return !is_float_weight(w.type) && n >= 1 && n <= kChunkedMatvecMaxCols && w.n_in % hd::kActBlock == 0 &&
         !mmq_takes(w, n);
}

bool deferred_norm_ok(const WeightMatrix& w, int n) {
  return w.layout == WeightLayout::CudaSplit && prepared_matmul_ok(w, n);
}

void matmul_prepared(const WeightMatrix& w, const ActsOut& o, float* y, int n, CudaContext& ctx, const DeferredNorm& dn) {
  const ActView a = view_of(o, dn);
  validate_device_weights(w);
  check(prepared_matmul_ok(w, n), "CUDA matmul_prepared: ", dtype_name(w.type), " with ", n, " columns");
  for (int c = 0; c < n; c += kMatvecMaxCols) launch_matvec(w, a, c, std::min(kMatvecMaxCols, n - c), y, ctx);
}

void matmul_parts_prepared(std::span<const MatvecPart> parts, const ActsOut& o, int n, CudaContext& ctx,
                           const DeferredNorm& dn) {
  const ActView a = view_of(o, dn);
  check(!parts.empty(), "CUDA matmul_parts_prepared: no parts");
  for (const MatvecPart& p : parts) {
    validate_device_weights(*p.w);
    check(prepared_matmul_ok(*p.w, n) && p.w->n_in == parts[0].w->n_in, "CUDA matmul_parts_prepared: ",
          dtype_name(p.w->type), " ", p.w->n_out, "x", p.w->n_in, " with ", n, " columns");
  }
  const bool together = parts_stream_together(parts);
  for (int c = 0; c < n; c += kMatvecMaxCols) {
    const int nc = std::min(kMatvecMaxCols, n - c);
    if (together) {
      launch_matvec_stream_parts(parts, a, c, nc, ctx);
    } else if (n == 1 && launch_matvec_split_parts2(parts, a, nc, ctx)) {
      // q, k of one type, v of another (K-quant mixes): one launch
    } else {
      for (const MatvecPart& p : parts) launch_matvec(*p.w, a, c, nc, p.y, ctx);
    }
  }
}

}  // namespace polykv::cuda
