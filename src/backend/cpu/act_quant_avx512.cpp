// AVX-512 activation quantization, bit-identical to the scalar act_quant.cpp (same IEEE operations in
// the same order per value: |x| max, d = amax / 127, id = 1 / d, round-to-nearest-even of x * id,
// clamp to ±127), so every ISA still multiplies the very same integers. Finite inputs assumed.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "backend/cpu/matmul_kernels.h"

namespace polykv::cpu {
namespace {

// Quantizes 16 values with inverse scale id into int32 lanes (|q| <= 127).
inline __m512i quantize16(const float* x, __m512 id) {
  const __m512 v = _mm512_roundscale_ps(_mm512_mul_ps(_mm512_loadu_ps(x), id),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 lim = _mm512_set1_ps(127.0f);
  return _mm512_cvtps_epi32(_mm512_min_ps(lim, _mm512_max_ps(_mm512_sub_ps(_mm512_setzero_ps(), lim), v)));
}

// amax of n (a multiple of 16) values -> d, and 1/d (0 for an all-zero block), as in the scalar code.
inline float block_scale(const float* x, int n, float* id) {
  __m512 m = _mm512_setzero_ps();
  for (int i = 0; i < n; i += 16) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(x + i)));
  const float d = _mm512_reduce_max_ps(m) / 127.0f;
  *id = d != 0.0f ? 1.0f / d : 0.0f;
  return d;
}

}  // namespace

void quantize_act_q8_32_avx512(const float* x, int64_t n, int8_t* qs, float* d, int32_t* sum) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* xb = x + b * 32;
    float id;
    d[b] = block_scale(xb, 32, &id);
    const __m512 vid = _mm512_set1_ps(id);
    const __m512i q0 = quantize16(xb, vid), q1 = quantize16(xb + 16, vid);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + b * 32), _mm512_cvtepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + b * 32 + 16), _mm512_cvtepi32_epi8(q1));
    sum[b] = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
  }
}

void quantize_act_q8_K_avx512(const float* x, int64_t n, int8_t* qs, float* d, int16_t* bsums) {
  for (int64_t b = 0; b < n / 256; ++b) {
    const float* xb = x + b * 256;
    float id;
    d[b] = block_scale(xb, 256, &id);
    const __m512 vid = _mm512_set1_ps(id);
    for (int j = 0; j < 16; ++j) {
      const __m512i q = quantize16(xb + 16 * j, vid);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + b * 256 + 16 * j), _mm512_cvtepi32_epi8(q));
      bsums[b * 16 + j] = int16_t(_mm512_reduce_add_epi32(q));  // |s| <= 16 * 127
    }
  }
}

}  // namespace polykv::cpu
