// Scalar IEEE half and bfloat16 conversions (round to nearest even), bit-exact with ggml's.
#pragma once
#include <cstdint>
#include <cstring>

namespace polykv {

inline float f32_from_bits(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
inline uint32_t bits_from_f32(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }

inline float fp16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  const uint32_t man = h & 0x3ff;
  if (exp == 0) {
    // zero or subnormal: value = man * 2^-24
    float v = float(man) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (exp == 31) return f32_from_bits(sign | 0x7f800000u | (man << 13));
  return f32_from_bits(sign | ((exp + 112) << 23) | (man << 13));
}

inline uint16_t f32_to_fp16(float f) {
  const uint32_t x = bits_from_f32(f);
  const uint32_t sign = (x >> 16) & 0x8000;
  uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return uint16_t(sign | 0x7c00 | (abs > 0x7f800000u ? 0x200 : 0));  // inf/nan
  if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00);  // rounds to >= 65520: overflow to inf
  if (abs < 0x38800000u) {
    // result is subnormal (or zero): round abs/2^-24 to nearest even integer
    const float v = f32_from_bits(abs) * 16777216.0f;
    uint32_t m = uint32_t(v);
    const float rem = v - float(m);
    if (rem > 0.5f || (rem == 0.5f && (m & 1))) ++m;
    return uint16_t(sign | m);
  }
  // normal: rebias exponent, round mantissa to 10 bits, nearest even
  uint32_t r = abs - 0x38000000u;  // exponent -112
  r += 0xfff + ((r >> 13) & 1);
  return uint16_t(sign | (r >> 13));
}

// f rounded to the nearest fp16 value (nearest even), as a float.
inline float fp16_exact(float f) { return fp16_to_f32(f32_to_fp16(f)); }

inline float bf16_to_f32(uint16_t b) { return f32_from_bits(uint32_t(b) << 16); }

inline uint16_t f32_to_bf16(float f) {
  uint32_t x = bits_from_f32(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 64);  // quiet nan
  return uint16_t((x + (0x7fff + ((x >> 16) & 1))) >> 16);
}

}  // namespace polykv
