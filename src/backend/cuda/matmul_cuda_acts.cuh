// The device's 8-bit quantization of one block of 32 activations, shared by the activation kernel of
// the mat-vec path (matmul_cuda.cu) and the kernels that write activations for the next mat-vec
// while producing its input (ops_cuda_acts.cu): one implementation, so the bits are the same.
// Included by .cu files only.
#pragma once
#include <cstdint>

#include "backend/cuda/matmul_cuda_dot.cuh"

namespace polykv::cuda {

// All 32 lanes of a warp call it, lane l holding value l of the block: writes qs[l] (every lane) and
// *s (lane 0), the values of hd::quantize_act_block (the max and the integer sums are exact in any
// order).
__device__ __forceinline__ void quantize_act_block_warp(float v, int lane, int8_t* qs, hd::ActScale* s) {
  float amax = fabsf(v);
#pragma unroll
  for (int off = 16; off > 0; off /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
  const float d = hd::act_d(amax);
  const int32_t q = hd::act_quant(v, hd::act_inverse(d));
  qs[lane] = int8_t(q);
  int32_t half = q;  // sums over lanes 0..15 and 16..31
#pragma unroll
  for (int off = 8; off > 0; off /= 2) half += __shfl_xor_sync(0xffffffffu, half, off);
  const int32_t hi = __shfl_sync(0xffffffffu, half, 16);
  if (lane == 0) {
    const hd::ActScale a = hd::act_scale(d, half, hi);
    *reinterpret_cast<float4*>(s) = make_float4(a.d, a.s_lo, a.s_hi, a.s_all);
  }
}

// quantize_act_block_warp for J blocks at once, lane l holding value l of block j in v[j]; block j
// (j < n_blocks, warp-uniform) writes qs + j * qs_step * 32 and s + j * qs_step. The J blocks' shuffle
// chains run side by side (one after the other they cost J x 10 shuffle latencies); each block's
// values are those of quantize_act_block_warp.
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

}  // namespace polykv::cuda
