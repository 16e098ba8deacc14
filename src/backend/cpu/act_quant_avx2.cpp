// AVX2 activation quantization, bit-identical to the scalar act_quant.cpp (the same IEEE operations
// in the same order per value: |x| max, d = amax / 127, id = 1 / d, round-to-nearest-even of x * id,
// clamp to ±127), so every ISA still multiplies the very same integers. Finite inputs assumed.
#include <immintrin.h>

#include "backend/cpu/matmul_kernels.h"

namespace polykv::cpu {
namespace {

// Quantizes 8 values with inverse scale id into int32 lanes (|q| <= 127).
inline __m256i quantize8(const float* x, __m256 id) {
  const __m256 v = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x), id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 lim = _mm256_set1_ps(127.0f);
  return _mm256_cvtps_epi32(_mm256_min_ps(lim, _mm256_max_ps(_mm256_sub_ps(_mm256_setzero_ps(), lim), v)));
}

// amax of n (a multiple of 8) values -> d, and 1/d (0 for an all-zero block), as in the scalar code.
inline float block_scale(const float* x, int n, float* id) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256 m = _mm256_setzero_ps();
  for (int i = 0; i < n; i += 8) m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(x + i), abs_mask));
  __m128 r = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  r = _mm_max_ps(r, _mm_movehl_ps(r, r));
  r = _mm_max_ss(r, _mm_movehdup_ps(r));
  const float d = _mm_cvtss_f32(r) / 127.0f;
  *id = d != 0.0f ? 1.0f / d : 0.0f;
  return d;
}

inline int32_t hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// 32 values -> 32 int8 at q; a = Σ of the first 16 quants, b = Σ of the last 16.
inline void quantize32(const float* x, __m256 id, int8_t* q, int32_t* a, int32_t* b) {
  const __m256i q0 = quantize8(x, id), q1 = quantize8(x + 8, id), q2 = quantize8(x + 16, id),
                q3 = quantize8(x + 24, id);
  // The packs work per 128-bit half: dword k holds quants 4k'..4k'+3 of q(k % 4) with k' = k / 4;
  // the permute puts them back in order.
  const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(q0, q1), _mm256_packs_epi32(q2, q3));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q),
                      _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  *a = hsum_epi32(_mm256_add_epi32(q0, q1));
  *b = hsum_epi32(_mm256_add_epi32(q2, q3));
}

}  // namespace

void quantize_act_q8_32_avx2(const float* x, int64_t n, int8_t* qs, float* d, int32_t* sum) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* xb = x + b * 32;
    float id;
    d[b] = block_scale(xb, 32, &id);
    int32_t s0, s1;
    quantize32(xb, _mm256_set1_ps(id), qs + b * 32, &s0, &s1);
    sum[b] = s0 + s1;
  }
}

void quantize_act_q8_K_avx2(const float* x, int64_t n, int8_t* qs, float* d, int16_t* bsums) {
  for (int64_t b = 0; b < n / 256; ++b) {
    const float* xb = x + b * 256;
    float id;
    d[b] = block_scale(xb, 256, &id);
    const __m256 vid = _mm256_set1_ps(id);
    for (int j = 0; j < 8; ++j) {
      int32_t s0, s1;
      quantize32(xb + 32 * j, vid, qs + b * 256 + 32 * j, &s0, &s1);
      bsums[b * 16 + 2 * j] = int16_t(s0);  // |s| <= 16 * 127
      bsums[b * 16 + 2 * j + 1] = int16_t(s1);
    }
  }
}

}  // namespace polykv::cpu
