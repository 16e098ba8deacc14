// Splitting floats into two f16 (hi + lo) for exact-enough tensor-core products
// (attention_cuda_mma.cuh): hi = f16(x), lo = f16(x - hi), so hi + lo is x to about 2^-22 relative
// (plus f16's subnormal step, 2^-24, absolute) while |x| < 65504. __host__ __device__ (POLYKV_HD);
// tests/cuda_half_split_test.cpp checks them on the CPU.
#pragma once
#include <cstdint>

#include "backend/cuda/kv_decode.cuh"

namespace polykv::cuda {

// f16 bits of x, rounded to nearest even.
POLYKV_HD uint32_t to_half_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __half_as_ushort(__float2half_rn(x));
#else
  return f32_to_fp16(x);
#endif
}
// hi = f16(x), lo = f16(x - hi), as bits.
POLYKV_HD void split_half(float x, uint32_t& hi, uint32_t& lo) {
  hi = to_half_bits(x);
  lo = to_half_bits(x - half_to_float(hi));
}
// A register of two f16: element x0 in the low half.
POLYKV_HD uint32_t pack_halves(uint32_t x0, uint32_t x1) { return x0 | (x1 << 16); }
// Two floats rounded to f16 (to nearest even) as one register, x0 in the low half (one cvt on the device).
POLYKV_HD uint32_t half2_bits(float x0, float x1) {
#if defined(__CUDA_ARCH__)
  const __half2 h = __floats2half2_rn(x0, x1);
  return *reinterpret_cast<const uint32_t*>(&h);
#else
  return pack_halves(to_half_bits(x0), to_half_bits(x1));
#endif
}
// Two floats as the hi and lo registers of an f16 pair.
POLYKV_HD void split_pair(float x0, float x1, uint32_t& hi, uint32_t& lo) {
#if defined(__CUDA_ARCH__)
  // The same roundings (to nearest even, each half) with the paired conversions: one cvt packs
  // both halves, so ~6 instructions instead of ~12 (the prefix and prefill kernels' P and K / V splits).
  const __half2 h = __floats2half2_rn(x0, x1);
  const float2 hf = __half22float2(h);
  const __half2 l = __floats2half2_rn(x0 - hf.x, x1 - hf.y);
  hi = *reinterpret_cast<const uint32_t*>(&h);
  lo = *reinterpret_cast<const uint32_t*>(&l);
#else
  uint32_t h0, l0, h1, l1;
  split_half(x0, h0, l0);
  split_half(x1, h1, l1);
  hi = pack_halves(h0, h1);
  lo = pack_halves(l0, l1);
#endif
}

}  // namespace polykv::cuda
