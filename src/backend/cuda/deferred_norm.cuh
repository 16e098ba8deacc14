// The inverse norm of a row whose norm was deferred into a mat-vec (ops_cuda_acts.h, DeferredNorm): one
// function for the mat-vec's epilogue and for rmsnorm_materialize, so both scale by the same bits.
#pragma once
#include "backend/cuda/ops_cuda_math.cuh"

namespace polykv::cuda {

// rms_inv of the row whose blocks of 32 values have sums of squares ss[0 .. cols / 32), by a warp: lane l
// adds blocks l, l + 32, ... in that order, then a butterfly over the lanes (xor 16 .. 1). Every lane gets
// the same bits (each level adds the same two doubles in either order). All 32 lanes must call it.
__device__ __forceinline__ float deferred_inv(const double* ss, int cols, float eps, int lane) {
  const int nb = cols / 32;
  double s = 0;
  for (int b = lane; b < nb; b += 32) s = math::dadd_rn(s, ss[b]);
#pragma unroll
  for (int off = 16; off > 0; off /= 2) s = math::dadd_rn(s, __shfl_xor_sync(0xffffffffu, s, off));
  return math::rms_inv(s, cols, eps);
}

}  // namespace polykv::cuda
