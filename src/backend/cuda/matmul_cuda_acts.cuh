// The device's 8-bit quantization of one block of 32 activations, shared by the activation kernel of
// the mat-vec path (matmul_cuda.cu) and the kernels that write activations for the next mat-vec
// while producing its input (ops_cuda_acts.cu): one implementation, so the bits are the same.
// Included by .cu files only.
#pragma once
#include <cstdint>

#include "backend/cuda/matmul_cuda_dot.cuh"

namespace polykv::cuda {

// J blocks of 32 activations at once (quantize_act_block_warp below is J = 1), lane l holding value l
// of block j in v[j]; block j (j < n_blocks, warp-uniform) writes qs + j * step * 32 and s + j * step.
// The J blocks' shuffle chains run side by side (one after the other they cost J x 10 shuffle
// latencies); the values are hd::quantize_act_block's (the max and the integer sums are exact in any
// order).
template <int J>
__device__ __forceinline__ void quantize_act_blocks_warp(const float (&v)[J], int n_blocks, int lane, int8_t* qs,
                                                         hd::ActScale* s, int64_t step) {
  float amax[J];
#pragma unroll
  for (int j = 0; j < J; ++j) amax[j] = fabsf(v[j]);
#pragma unroll
  for (int off = 16; off > 0; off /= 2)
#pragma unroll
    for (int j = 0; j < J; ++j) amax[j] = fmaxf(amax[j], __shfl_xor_sync(0xffffffffu, amax[j], off));
  float d[J];
  int32_t half[J];
#pragma unroll
  for (int j = 0; j < J; ++j) {
    d[j] = hd::act_d(amax[j]);
    half[j] = hd::act_quant(v[j], hd::act_inverse(d[j]));
    if (j < n_blocks) qs[j * step * hd::kActBlock + lane] = int8_t(half[j]);
  }
#pragma unroll
  for (int off = 8; off > 0; off /= 2)
#pragma unroll
    for (int j = 0; j < J; ++j) half[j] += __shfl_xor_sync(0xffffffffu, half[j], off);
#pragma unroll
  for (int j = 0; j < J; ++j) {
    const int32_t hi = __shfl_sync(0xffffffffu, half[j], 16);
    if (lane == 0 && j < n_blocks) {
      const hd::ActScale a = hd::act_scale(d[j], half[j], hi);
      *reinterpret_cast<float4*>(s + j * step) = make_float4(a.d, a.s_lo, a.s_hi, a.s_all);
    }
  }
}

// One block: all 32 lanes of a warp call it, lane l holding value l; writes qs[l] (every lane) and *s
// (lane 0).
__device__ __forceinline__ void quantize_act_block_warp(float v, int lane, int8_t* qs, hd::ActScale* s) {
  const float vs[1] = {v};
  quantize_act_blocks_warp<1>(vs, 1, lane, qs, s, 0);
}

}  // namespace polykv::cuda
