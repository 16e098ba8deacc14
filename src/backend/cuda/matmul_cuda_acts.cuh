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

}  // namespace polykv::cuda
