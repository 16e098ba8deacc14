// Small AVX2 helpers shared by the SIMD kernel files (only include from *_avx2.cpp / *_avx512.cpp).
// Internal linkage on purpose: each ISA's TU gets its own copy, compiled for that ISA (an inline
// function with external linkage could be merged by the linker into one copy built for AVX-512).
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace polykv::cpu {
namespace {

inline float half_to_f32(uint16_t h) { return _cvtsh_ss(h); }

inline float hsum_ps(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

// 16 bytes of packed nibbles -> 32 bytes: low nibbles (values 0..15) then high nibbles (16..31).
inline __m256i unpack_nibbles(const uint8_t* qs) {
  const __m128i q = load128(qs);
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(q, 4), q);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

// int32 vector with x in lane 0 and zeros elsewhere (a per-block integer correction term).
inline __m256i lane0_epi32(int32_t x) { return _mm256_setr_epi32(x, 0, 0, 0, 0, 0, 0, 0); }

// Two int16 scales as a vector: lanes 0..7 = lo, lanes 8..15 = hi (the two 16-value halves of a
// 32-byte maddubs product).
inline __m256i scales_pair(int lo, int hi) {
  return _mm256_set_m128i(_mm_set1_epi16(int16_t(hi)), _mm_set1_epi16(int16_t(lo)));
}

inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

}  // namespace
}  // namespace polykv::cpu
