// Primitives shared by the CUDA matmul kernels and their host twins (tests/cuda_quant_decode_test.cpp):
// the same source compiles with nvcc (device code) and with g++ (host code, CPU tests in CI).
//
// Every float operation of the decode and dot paths goes through fmul / fadd / fma below, which are
// the IEEE round-to-nearest intrinsics on the device (never contracted nor reassociated by nvcc) and
// the plain operations on the host (x86-64 baseline has no FMA unit, so g++ cannot contract them; fma
// is std::fmaf, correctly rounded). So one (row, column) dot runs the same operations in the same
// order whatever kernel variant computes it (batch invariance), and the host emulation of a kernel
// computes what the device computes.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#include <cuda_fp16.h>
#define POLYKV_HD __host__ __device__ __forceinline__
#define POLYKV_HDC __host__ __device__  // with constexpr
#else
#define POLYKV_HD inline
#define POLYKV_HDC
#endif

namespace polykv::cuda::hd {

POLYKV_HD float fmul(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

POLYKV_HD float fadd(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

// a * b + c with one rounding.
POLYKV_HD float fma(float a, float b, float c) {
#ifdef __CUDA_ARCH__
  return __fmaf_rn(a, b, c);
#else
  return std::fmaf(a, b, c);
#endif
}

POLYKV_HD float bits_to_f32(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

POLYKV_HD uint32_t f32_to_bits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

// Exact int -> float for |v| < 2^22: 1.5 * 2^23 + v has v in its low mantissa bits. Two integer/float
// adds instead of the quarter-rate I2F conversion.
POLYKV_HD float i2f_exact(int32_t v) {
  return fadd(bits_to_f32(uint32_t(0x4B400000 + v)), -12582912.0f);
}

// IEEE half -> float (exact), the same value as core/fp16.h's fp16_to_f32.
POLYKV_HD float half_to_f32(uint16_t h) {
#ifdef __CUDA_ARCH__
  return __half2float(__ushort_as_half(h));
#else
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  const uint32_t man = h & 0x3ff;
  if (exp == 0) {  // zero or subnormal: man * 2^-24
    const float v = float(man) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (exp == 31) return bits_to_f32(sign | 0x7f800000u | (man << 13));
  return bits_to_f32(sign | ((exp + 112) << 23) | (man << 13));
#endif
}

POLYKV_HD float bf16_to_f32(uint16_t b) { return bits_to_f32(uint32_t(b) << 16); }

// Σ_k a.byte[k] * b.byte[k] + c over the four signed bytes of a and b.
POLYKV_HD int32_t dp4a(uint32_t a, uint32_t b, int32_t c) {
#ifdef __CUDA_ARCH__
  return __dp4a(int(a), int(b), c);
#else
  for (int k = 0; k < 4; ++k) c += int32_t(int8_t(a >> (8 * k))) * int32_t(int8_t(b >> (8 * k)));
  return c;
#endif
}

// Signed byte k of w.
POLYKV_HD int32_t byte_s8(uint32_t w, int k) { return int32_t(int8_t(uint8_t(w >> (8 * k)))); }

// Alignment (a power of two, at most 16) that every address p + i * stride has, for p's and
// stride's common alignment.
inline int common_alignment(uintptr_t p, size_t stride) {
  int a = 16;
  while (a > 1 && ((p % uintptr_t(a)) != 0 || (stride % size_t(a)) != 0)) a /= 2;
  return a;
}

// Alignment of (a-aligned base) + offset.
POLYKV_HDC constexpr int field_align(int a, int offset) {
  int f = 1;
  while (f < a && offset % (2 * f) == 0) f *= 2;
  return f;
}

// Loads from device memory (or host memory in the host build). p must be aligned to A bytes
// (A >= 2); wider accesses are used where A allows.
// A = 1 is a promise of its own: p is 2-byte aligned AND the aligned 4-byte words that hold the
// field's bytes may be read whole (a shared-memory staging buffer, whose 16-byte chunks extend past
// every block they hold: see hd::Stage). The field is then read as aligned words joined by a funnel
// shift: 5 word loads for 16 bytes instead of 8 two-byte loads. Never used on device memory rows
// (the word past a row's last block may lie outside the allocation).
POLYKV_HD uint32_t ld_u8(const uint8_t* p) { return *p; }

// The aligned word at p (p % 4 == 0).
POLYKV_HD uint32_t ld_word(const uint8_t* p) {
#ifdef __CUDA_ARCH__
  return *reinterpret_cast<const uint32_t*>(p);
#else
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
#endif
}

// Bits [sh, sh + 32) of hi:lo (sh is 0 or 16).
POLYKV_HD uint32_t funnel_r(uint32_t lo, uint32_t hi, uint32_t sh) {
#ifdef __CUDA_ARCH__
  return __funnelshift_r(lo, hi, sh);
#else
  return uint32_t(((uint64_t(hi) << 32) | lo) >> sh);
#endif
}

// n words of the bytes at p (2-byte aligned, A = 1 above): word k = bytes p + 4k .. p + 4k + 3.
// Reads n + 1 aligned words when p % 4 == 2, n otherwise (never the word past the field's last
// byte when p is 4-byte aligned).
template <int N>
POLYKV_HD void ld_words_a1(const uint8_t* p, uint32_t* out) {
  const uintptr_t mis = reinterpret_cast<uintptr_t>(p) & 3u;  // 0 or 2
  const uint8_t* a = p - mis;
  const uint32_t sh = uint32_t(mis) * 8u;
  uint32_t w[N + 1];
#pragma unroll
  for (int k = 0; k < N; ++k) w[k] = ld_word(a + 4 * k);
  w[N] = ld_word(a + (mis ? 4 * N : 4 * (N - 1)));  // the word past the field only when needed
#pragma unroll
  for (int k = 0; k < N; ++k) out[k] = funnel_r(w[k], w[k + 1], sh);
}

POLYKV_HD uint32_t ld_u16(const uint8_t* p) {
#ifdef __CUDA_ARCH__
  return *reinterpret_cast<const uint16_t*>(p);
#else
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
#endif
}

template <int A>
POLYKV_HD uint32_t ld_u32(const uint8_t* p) {
  static_assert(A >= 1, "blocks are at least 2-byte aligned");
  if constexpr (A == 1) {
    uint32_t v;
    ld_words_a1<1>(p, &v);
    return v;
  } else {
#ifdef __CUDA_ARCH__
    if constexpr (A >= 4) {
      return *reinterpret_cast<const uint32_t*>(p);
    } else {
      const uint16_t* h = reinterpret_cast<const uint16_t*>(p);
      return uint32_t(h[0]) | (uint32_t(h[1]) << 16);
    }
#else
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
#endif
  }
}

// 16 bytes at p into w[0..3] (little-endian words).
template <int A>
POLYKV_HD void ld_16B(const uint8_t* p, uint32_t w[4]) {
  static_assert(A >= 1, "blocks are at least 2-byte aligned");
#ifdef __CUDA_ARCH__
  if constexpr (A == 1) {
    ld_words_a1<4>(p, w);
  } else if constexpr (A >= 16) {
    const uint4 v = *reinterpret_cast<const uint4*>(p);
    w[0] = v.x; w[1] = v.y; w[2] = v.z; w[3] = v.w;
  } else if constexpr (A >= 8) {
    const uint2 a = reinterpret_cast<const uint2*>(p)[0];
    const uint2 b = reinterpret_cast<const uint2*>(p)[1];
    w[0] = a.x; w[1] = a.y; w[2] = b.x; w[3] = b.y;
  } else {
#pragma unroll
    for (int k = 0; k < 4; ++k) w[k] = ld_u32<A>(p + 4 * k);
  }
#else
  if constexpr (A == 1)
    ld_words_a1<4>(p, w);  // the same words as the device reads (tested on the CPU)
  else
    std::memcpy(w, p, 16);
#endif
}

}  // namespace polykv::cuda::hd
