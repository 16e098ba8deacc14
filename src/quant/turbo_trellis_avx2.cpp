// AVX2 decoder of trellis-coded turbo3 rows into the rotated basis (layout in turbo_trellis.h; the
// scalar decode_rotated in turbo_trellis.cpp is the reference). 8 coordinates at a time:
//   window w_j = bits [i+j-3, i+j] of the t stream: one 16-bit load of t bits i-8..i+7, broadcast,
//                shifted by 5+j per lane, masked to 4 bits;
//   subset     = 2 bits of the constant kSubsetWord at 2*w (a variable shift);
//   level k    = subset + 4*j_i (16 levels: two 8-entry tables blended on bit 3).
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
constexpr uint32_t kSubsetWord = subset_word();

void decode_rotated_avx2(const uint8_t* src, float* y, int head_dim) {
  const int n = head_dim % 128 == 0 ? 128 : head_dim;  // head_dim was validated when the row was made
  const size_t gb = 2 + size_t(n) * 3 / 8;
  const float* lv = levels(n);
  const __m256 table_lo = _mm256_loadu_ps(lv), table_hi = _mm256_loadu_ps(lv + 8);
  const __m256i window_shift = _mm256_setr_epi32(5, 6, 7, 8, 9, 10, 11, 12);
  const __m256i index_shift = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
  const __m256i subsets = _mm256_set1_epi32(int(kSubsetWord));
  const __m256i three = _mm256_set1_epi32(3), fifteen = _mm256_set1_epi32(15);
  for (int g = 0; g < head_dim / n; ++g) {
    const uint8_t* rec = src + size_t(g) * gb;
    const uint8_t* tbits = rec + 2;
    const uint8_t* jbits = tbits + n / 8;
    uint16_t h;
    std::memcpy(&h, rec, 2);
    const __m256 norm = _mm256_set1_ps(fp16_to_f32(h));
    float* out = y + g * n;
    for (int i = 0; i < n; i += 8) {
      const uint32_t t = (i ? uint32_t(tbits[i / 8 - 1]) : 0u) | (uint32_t(tbits[i / 8]) << 8);
      const __m256i w = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(int(t)), window_shift), fifteen);
      const __m256i subset = _mm256_and_si256(_mm256_srlv_epi32(subsets, _mm256_slli_epi32(w, 1)), three);
      const uint32_t jw = uint32_t(jbits[i / 4]) | (uint32_t(jbits[i / 4 + 1]) << 8);
      const __m256i j = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(int(jw)), index_shift), three);
      const __m256i k = _mm256_add_epi32(subset, _mm256_slli_epi32(j, 2));
      const __m256 v = _mm256_blendv_ps(_mm256_permutevar8x32_ps(table_lo, k), _mm256_permutevar8x32_ps(table_hi, k),
                                        _mm256_castsi256_ps(_mm256_slli_epi32(k, 28)));
      _mm256_storeu_ps(out + i, _mm256_mul_ps(norm, v));
    }
  }
}

}  // namespace

DecodeFn decode_rotated_avx2_kernel() { return cpu_features().has_avx2_set() ? decode_rotated_avx2 : nullptr; }

void decode_rotated_fast(const uint8_t* src, float* y, int head_dim) {
  static const DecodeFn best = decode_rotated_avx512_kernel() ? decode_rotated_avx512_kernel()
                               : decode_rotated_avx2_kernel() ? decode_rotated_avx2_kernel()
                                                              : decode_rotated;
  best(src, y, head_dim);
}

}  // namespace polykv::turbo::trellis
