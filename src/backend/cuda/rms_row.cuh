// rmsnorm of one row by one block of math::kRmsThreads threads with the row held in registers
// (device only; used by rmsnorm_kernel, add_rmsnorm_kernel and rmsnorm_acts_kernel).
//
// Why: a loop "x[i] = x[i] + r[i]" (or "o[i] = f(x[i], w[i])") over a thread's 16 indices cannot
// have its loads hoisted above the previous iteration's store (the pointers may alias), so each
// iteration paid a full memory latency: 12 us for one 4096-value add+rmsnorm on an H200 (Nsight
// Compute, 2026-12-01), against ~3 us for the bytes. Here every load of a phase is issued before
// any store: thread t holds v[j] = x[t + kRmsThreads j], j < J, for rows of at most kRmsThreads * J
// values (RmsRegs picks J; longer rows take the loop kernels' path, RmsRegs = 0).
//
// Same arithmetic as ops_cuda_math.cuh's rms_partial / rms_tree_step / rms_inv / rms_out, in the
// same order (thread t's squares in ascending i; the partials by the stride tree, its last five
// levels through warp shuffles that pair the same indices), so the results are the loop kernels'
// bits.
#pragma once
#include "backend/cuda/ops_cuda_math.cuh"

namespace polykv::cuda::rms {

using math::kRmsThreads;

// Values per thread kept in registers for a row of `cols`: 8, 16 or 32; 0 when the row is longer
// than kRmsThreads * 32 (the loop path).
inline int regs_for(int cols) {
  if (cols <= kRmsThreads * 8) return 8;
  if (cols <= kRmsThreads * 16) return 16;
  if (cols <= kRmsThreads * 32) return 32;
  return 0;
}

// v[j] = xr[t + kRmsThreads j] (0 past cols); with rr: add_rn(xr[i], rr[i]). All loads first.
template <int J>
__device__ __forceinline__ void load_row(const float* xr, const float* rr, int cols, int t, float (&v)[J]) {
  float a[J];
#pragma unroll
  for (int j = 0; j < J; ++j) {
    const int i = t + kRmsThreads * j;
    v[j] = i < cols ? xr[i] : 0.0f;
    a[j] = rr != nullptr && i < cols ? rr[i] : 0.0f;
  }
  if (rr != nullptr) {
#pragma unroll
    for (int j = 0; j < J; ++j) v[j] = math::add_rn(v[j], a[j]);
  }
}

template <int J>
__device__ __forceinline__ void load_weights(const float* w, int cols, int t, float (&wv)[J]) {
#pragma unroll
  for (int j = 0; j < J; ++j) {
    const int i = t + kRmsThreads * j;
    wv[j] = i < cols ? w[i] : 0.0f;
  }
}

template <int J>
__device__ __forceinline__ void store_row(float* dst, int cols, int t, const float (&v)[J]) {
#pragma unroll
  for (int j = 0; j < J; ++j) {
    const int i = t + kRmsThreads * j;
    if (i < cols) dst[i] = v[j];
  }
}

// 1 / sqrt(mean(x^2) + eps) of the block's row, the same in every thread. `partials` is the block's
// shared [kRmsThreads] doubles, `inv` a shared float.
// row_inv from thread t's own sum of squares s (its values' squares added in ascending index).
__device__ __forceinline__ float row_inv_of_partial(double s, int cols, float eps, int t, double* partials,
                                                    float* inv);

template <int J>
__device__ __forceinline__ float row_inv(const float (&v)[J], int cols, float eps, int t, double* partials,
                                         float* inv) {
  double s = 0;
#pragma unroll
  for (int j = 0; j < J; ++j)
    if (t + kRmsThreads * j < cols) s = math::dadd_rn(s, math::dmul_rn(double(v[j]), double(v[j])));
  return row_inv_of_partial(s, cols, eps, t, partials, inv);
}

__device__ __forceinline__ float row_inv_of_partial(double s, int cols, float eps, int t, double* partials,
                                                    float* inv) {
  partials[t] = s;
  __syncthreads();
#pragma unroll
  for (int stride = kRmsThreads / 2; stride >= 32; stride /= 2) {
    math::rms_tree_step(partials, t, stride);
    __syncthreads();
  }
  if (t < 32) {  // strides 16 .. 1: lane t < stride adds lane t + stride's value, as rms_tree_step
    double p = partials[t];
#pragma unroll
    for (int stride = 16; stride > 0; stride /= 2) {
      const double o = __shfl_down_sync(0xffffffffu, p, stride);
      if (t < stride) p = math::dadd_rn(p, o);
    }
    if (t == 0) *inv = math::rms_inv(p, cols, eps);
  }
  __syncthreads();
  return *inv;
}

}  // namespace polykv::cuda::rms
