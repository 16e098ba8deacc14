// AVX-512 decoder of trellis-coded turbo3 rows into the rotated basis: turbo_trellis_avx2.cpp's
// method on 16 coordinates at a time, with the 16 levels looked up by one vpermps.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstring>

#include "core/cpu_features.h"
#include "core/fp16.h"
#include "quant/turbo.h"
#include "quant/turbo_trellis.h"

namespace polykv::turbo::trellis {
namespace {

constexpr uint32_t subset_word() {
  uint32_t word = 0;
  for (int w = 0; w < 16; ++w) word |= uint32_t(subset_of_window(w)) << (2 * w);
  return word;
}

void decode_rotated_avx512(const uint8_t* src, float* y, int head_dim) {
  const int n = head_dim % 128 == 0 ? 128 : head_dim;  // head_dim was validated when the row was made
  const size_t gb = 2 + size_t(n) * 3 / 8;
  const __m512 table = _mm512_loadu_ps(levels(n));
  const __m512i window_shift = _mm512_setr_epi32(5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20);
  const __m512i index_shift = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i subsets = _mm512_set1_epi32(int(subset_word()));
  const __m512i three = _mm512_set1_epi32(3), fifteen = _mm512_set1_epi32(15);
  for (int g = 0; g < head_dim / n; ++g) {
    const uint8_t* rec = src + size_t(g) * gb;
    const uint8_t* tbits = rec + 2;
    const uint8_t* jbits = tbits + n / 8;
    uint16_t h;
    std::memcpy(&h, rec, 2);
    const __m512 norm = _mm512_set1_ps(fp16_to_f32(h));
    float* out = y + g * n;
    for (int i = 0; i < n; i += 16) {
      // t bits i-8 .. i+15 (the byte before the group's first is 0).
      const uint32_t t = (i ? uint32_t(tbits[i / 8 - 1]) : 0u) | (uint32_t(tbits[i / 8]) << 8) |
                         (uint32_t(tbits[i / 8 + 1]) << 16);
      const __m512i w = _mm512_and_si512(_mm512_srlv_epi32(_mm512_set1_epi32(int(t)), window_shift), fifteen);
      const __m512i subset = _mm512_and_si512(_mm512_srlv_epi32(subsets, _mm512_slli_epi32(w, 1)), three);
      uint32_t jw;
      std::memcpy(&jw, jbits + i / 4, 4);
      const __m512i j = _mm512_and_si512(_mm512_srlv_epi32(_mm512_set1_epi32(int(jw)), index_shift), three);
      const __m512i k = _mm512_add_epi32(subset, _mm512_slli_epi32(j, 2));
      _mm512_storeu_ps(out + i, _mm512_mul_ps(norm, _mm512_permutexvar_ps(k, table)));
    }
  }
}

}  // namespace

DecodeFn decode_rotated_avx512_kernel() { return cpu_features().has_avx512_set() ? decode_rotated_avx512 : nullptr; }

}  // namespace polykv::turbo::trellis
