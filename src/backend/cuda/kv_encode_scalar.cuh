// Per-element pieces of the KV encoders (backend/cuda/kv_encode.cuh), written once for the GPU and
// the CPU: nvcc compiles them as __device__ functions, g++ as plain inline functions, so
// tests/cuda_kv_encode_test.cpp checks on the CPU the very code the GPU runs.
//
// Rounding rule: every float/double operation that the CPU reference (src/quant, src/kv) rounds is
// written here as one explicitly rounded operation (mul_rn, add_rn, ...): on the device these are
// __fmul_rn & co., which nvcc never fuses into a multiply-add; on the host they are the plain
// operators (the project compiles C++ as ISO C++20, where g++ does not contract, and the x86-64
// baseline has no FMA). So the same operations are rounded in the same order on both sides.
// Inputs are finite floats; NaN/Inf inputs are outside the contract (the CPU reference's float ->
// int conversions are undefined behaviour for them).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kv/kv_type.h"

#ifdef __CUDACC__
#define POLYKV_KV_DEV __device__ inline
#define POLYKV_KV_UNROLL _Pragma("unroll")
#define POLYKV_KV_UNROLL8 _Pragma("unroll 8")  // serial chains: the loads of 8 steps issue first
#else
#define POLYKV_KV_DEV inline
#define POLYKV_KV_UNROLL
#define POLYKV_KV_UNROLL8
#endif

namespace polykv::cuda::enc {

// ---- IEEE operations, rounded to nearest even, never fused ----
#ifdef __CUDA_ARCH__
POLYKV_KV_DEV float mul_rn(float a, float b) { return __fmul_rn(a, b); }
POLYKV_KV_DEV float add_rn(float a, float b) { return __fadd_rn(a, b); }
POLYKV_KV_DEV float sub_rn(float a, float b) { return __fsub_rn(a, b); }
POLYKV_KV_DEV float div_rn(float a, float b) { return __fdiv_rn(a, b); }
POLYKV_KV_DEV double dmul_rn(double a, double b) { return __dmul_rn(a, b); }
POLYKV_KV_DEV double dadd_rn(double a, double b) { return __dadd_rn(a, b); }
POLYKV_KV_DEV double ddiv_rn(double a, double b) { return __ddiv_rn(a, b); }
POLYKV_KV_DEV double dsqrt_rn(double a) { return __dsqrt_rn(a); }
POLYKV_KV_DEV float d2f_rn(double a) { return __double2float_rn(a); }
POLYKV_KV_DEV float fabs_(float a) { return fabsf(a); }
POLYKV_KV_DEV float round_away(float a) { return roundf(a); }  // halves away from zero, as std::round
POLYKV_KV_DEV uint32_t bits_of(float f) { return __float_as_uint(f); }
POLYKV_KV_DEV float float_of(uint32_t u) { return __uint_as_float(u); }
POLYKV_KV_DEV float inf_f() { return __uint_as_float(0x7f800000u); }
#else
POLYKV_KV_DEV float mul_rn(float a, float b) { return a * b; }
POLYKV_KV_DEV float add_rn(float a, float b) { return a + b; }
POLYKV_KV_DEV float sub_rn(float a, float b) { return a - b; }
POLYKV_KV_DEV float div_rn(float a, float b) { return a / b; }
POLYKV_KV_DEV double dmul_rn(double a, double b) { return a * b; }
POLYKV_KV_DEV double dadd_rn(double a, double b) { return a + b; }
POLYKV_KV_DEV double ddiv_rn(double a, double b) { return a / b; }
POLYKV_KV_DEV double dsqrt_rn(double a) { return std::sqrt(a); }
POLYKV_KV_DEV float d2f_rn(double a) { return float(a); }
POLYKV_KV_DEV float fabs_(float a) { return std::fabs(a); }
POLYKV_KV_DEV float round_away(float a) { return std::round(a); }
POLYKV_KV_DEV uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
POLYKV_KV_DEV float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
POLYKV_KV_DEV float inf_f() { return std::numeric_limits<float>::infinity(); }
#endif

// Little-endian stores byte by byte (pool rows need no alignment).
POLYKV_KV_DEV void store_u16(uint8_t* p, uint16_t v) {
  p[0] = uint8_t(v);
  p[1] = uint8_t(v >> 8);
}
POLYKV_KV_DEV void store_u32(uint8_t* p, uint32_t v) {
  p[0] = uint8_t(v);
  p[1] = uint8_t(v >> 8);
  p[2] = uint8_t(v >> 16);
  p[3] = uint8_t(v >> 24);
}

// core/fp16.h's f32_to_fp16, step for step (IEEE half, round to nearest even; NaN -> quiet NaN).
POLYKV_KV_DEV uint16_t half_bits(float f) {
  const uint32_t x = bits_of(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return uint16_t(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to >= 65520: infinity
  if (abs < 0x38800000u) {                                  // subnormal half (or zero)
    const float v = mul_rn(float_of(abs), 16777216.0f);     // exact: a power of two
    uint32_t m = uint32_t(v);
    const float rem = sub_rn(v, float(m));
    if (rem > 0.5f || (rem == 0.5f && (m & 1u))) ++m;
    return uint16_t(sign | m);
  }
  uint32_t r = abs - 0x38000000u;
  r += 0xfffu + ((r >> 13) & 1u);
  return uint16_t(sign | (r >> 13));
}

// core/fp16.h's f32_to_bf16 (round to nearest even; NaN -> quiet NaN).
POLYKV_KV_DEV uint16_t bf16_bits(float f) {
  const uint32_t x = bits_of(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 64u);
  return uint16_t((x + (0x7fffu + ((x >> 16) & 1u))) >> 16);
}

// float -> int as the CPU reference's conversion behaves on x86-64 (cvttss2si): truncation, and
// INT_MIN for NaN or a value out of int range. A device conversion saturates instead (inf -> INT_MAX),
// which differs for the rows whose scale d underflows (d stored as fp16 0, so the codes are never
// read, but the bytes must still match the CPU's).
POLYKV_KV_DEV int to_int_x86(float v) {
  return (v >= -2147483648.0f && v < 2147483648.0f) ? int(v) : int(0x80000000u);
}

// One ggml q8_0 block (34 bytes: fp16 d, 32 int8) <- x[0..32): quant/quantize_ref.cpp's quantize_q8_0.
POLYKV_KV_DEV void encode_q8_0_block(const float* x, uint8_t* dst) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) {
    const float a = fabs_(x[j]);
    amax = amax < a ? a : amax;  // std::max(amax, a)
  }
  const float d = div_rn(amax, 127.0f);
  const float id = d != 0.0f ? div_rn(1.0f, d) : 0.0f;
  store_u16(dst, half_bits(d));
  for (int j = 0; j < 32; ++j) dst[2 + j] = uint8_t(int8_t(to_int_x86(round_away(mul_rn(x[j], id)))));
}

// One ggml q4_0 block (18 bytes: fp16 d, 16 bytes of nibbles) <- x[0..32): quantize_q4_0. The value
// of largest magnitude (the first on ties) maps to -8; q = min(15, trunc(x * id + 8.5)).
POLYKV_KV_DEV void encode_q4_0_block(const float* x, uint8_t* dst) {
  float amax = 0.0f, vmax = 0.0f;
  for (int j = 0; j < 32; ++j) {
    const float a = fabs_(x[j]);
    if (amax < a) {
      amax = a;
      vmax = x[j];
    }
  }
  const float d = div_rn(vmax, -8.0f);
  const float id = d != 0.0f ? div_rn(1.0f, d) : 0.0f;
  store_u16(dst, half_bits(d));
  uint8_t q[32];
  for (int j = 0; j < 32; ++j) {
    const int t = int(int8_t(to_int_x86(add_rn(mul_rn(x[j], id), 8.5f))));  // in 0..16 for finite x
    q[j] = uint8_t(t < 15 ? t : 15);
  }
  for (int j = 0; j < 16; ++j) dst[2 + j] = uint8_t((q[j] & 0x0F) | ((q[j + 16] & 0x0F) << 4));
}

// The plain KV types' rows by the lanes of a warp: lane `lane` (of 32) writes values (f32, f16, bf16) or 32-value
// blocks (q8_0, q4_0) lane, lane + 32, ... of row x [hd] into dst, quantize_head's bytes; other types: nothing.
// kv_store's array forms (kv_encode.cuh's encode_unit) and the decode kernel's self-encoded new rows
// (attention_cuda_decode8.cuh) both run it.
POLYKV_KV_DEV void encode_plain_lane(int lane, KvType t, int hd, const float* x, uint8_t* dst) {
  switch (t) {
    case KvType::F32:
      for (int i = lane; i < hd; i += 32) store_u32(dst + 4 * i, bits_of(x[i]));
      break;
    case KvType::F16:
      for (int i = lane; i < hd; i += 32) store_u16(dst + 2 * i, half_bits(x[i]));
      break;
    case KvType::BF16:
      for (int i = lane; i < hd; i += 32) store_u16(dst + 2 * i, bf16_bits(x[i]));
      break;
    case KvType::Q8_0:
      for (int b = lane; b < hd / 32; b += 32) encode_q8_0_block(x + 32 * b, dst + 34 * b);
      break;
    case KvType::Q4_0:
      for (int b = lane; b < hd / 32; b += 32) encode_q4_0_block(x + 32 * b, dst + 18 * b);
      break;
    default: break;
  }
}

// Byte k of the LSB-first bit stream of `count` values v[i] < 2^w (w in 1..4): value i occupies bits
// [w*i, w*i + w) of the little-endian byte string (quant/turbo.h, quant/turbo_trellis.h).
POLYKV_KV_DEV uint8_t stream_byte(const uint8_t* v, int w, int count, int k) {
  const int lo_bit = 8 * k;
  int last = (lo_bit + 7) / w;
  if (last > count - 1) last = count - 1;
  uint32_t acc = 0;
  for (int i = lo_bit / w; i <= last; ++i) {
    const int shift = w * i - lo_bit;  // negative only for a value that starts in the byte before
    acc |= shift >= 0 ? uint32_t(v[i]) << shift : uint32_t(v[i]) >> -shift;
  }
  return uint8_t(acc);
}

}  // namespace polykv::cuda::enc
