// AVX-512 decoder of trellis-coded turbo rows into the rotated basis: turbo_trellis_avx2.cpp's
// method on 16 coordinates at a time, with the levels looked up by one vpermps (8 or 16 levels) or
// one vpermt2ps (32 levels).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstring>

#include "core/cpu_features.h"
#include "quant/turbo.h"
#include "quant/turbo_trellis.h"
#include "quant/turbo_trellis_internal.h"

namespace polykv::turbo::trellis {
namespace {

// The (bits-1)-bit indices of coordinates i..i+15 (i a multiple of 16) in 16 lanes: lanes 0..7
// from the first 8 indices' w bytes, lanes 8..15 from the next w bytes.
template <int kBits>
__m512i indices16(const uint8_t* jbits, int i) {
  constexpr int w = kBits - 1;
  uint32_t lo = 0, hi = 0;
  std::memcpy(&lo, jbits + w * i / 8, size_t(w));
  std::memcpy(&hi, jbits + w * i / 8 + w, size_t(w));
  const __m512i words = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi32(int(lo))), _mm256_set1_epi32(int(hi)), 1);
  const __m512i shifts = _mm512_setr_epi32(0, w, 2 * w, 3 * w, 4 * w, 5 * w, 6 * w, 7 * w, 0, w, 2 * w, 3 * w, 4 * w,
                                           5 * w, 6 * w, 7 * w);
  return _mm512_and_si512(_mm512_srlv_epi32(words, shifts), _mm512_set1_epi32((1 << w) - 1));
}

template <int kBits>
void decode_groups(const uint8_t* src, float* y, int head_dim) {
  const detail::Shape s = detail::shape(kBits, head_dim);  // head_dim was validated when the row was made
  const float* lv = detail::level_table(kBits, s.group);
  // 8 levels fill lanes 0..7 (indices < 8 never read the rest); 32 levels span two registers.
  const __m512 table_lo = kBits == 2 ? _mm512_castps256_ps512(_mm256_loadu_ps(lv)) : _mm512_loadu_ps(lv);
  const __m512 table_hi = kBits == 4 ? _mm512_loadu_ps(lv + 16) : table_lo;
  const __m512i window_shift = _mm512_setr_epi32(5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20);
  const __m512i subsets = _mm512_set1_epi32(int(kSubsetWord));
  const __m512i three = _mm512_set1_epi32(3), fifteen = _mm512_set1_epi32(15);
  for (int g = 0; g < s.n_groups; ++g) {
    const detail::Record r = detail::record(src, s, g);
    const uint8_t* tbits = r.tbits;
    const __m512 norm = _mm512_set1_ps(r.norm);
    float* out = y + g * s.group;
    for (int i = 0; i < s.group; i += 16) {
      // t bits i-8 .. i+15 (the byte before the group's first is 0).
      const uint32_t t = (i ? uint32_t(tbits[i / 8 - 1]) : 0u) | (uint32_t(tbits[i / 8]) << 8) |
                         (uint32_t(tbits[i / 8 + 1]) << 16);
      const __m512i w = _mm512_and_si512(_mm512_srlv_epi32(_mm512_set1_epi32(int(t)), window_shift), fifteen);
      const __m512i subset = _mm512_and_si512(_mm512_srlv_epi32(subsets, _mm512_slli_epi32(w, 1)), three);
      const __m512i k = _mm512_add_epi32(subset, _mm512_slli_epi32(indices16<kBits>(r.jbits, i), 2));
      const __m512 v = kBits == 4 ? _mm512_permutex2var_ps(table_lo, k, table_hi) : _mm512_permutexvar_ps(k, table_lo);
      _mm512_storeu_ps(out + i, _mm512_mul_ps(norm, v));
    }
  }
}

void decode_rotated_avx512(int bits, const uint8_t* src, float* y, int head_dim) {
  if (bits == 2) return decode_groups<2>(src, y, head_dim);
  if (bits == 3) return decode_groups<3>(src, y, head_dim);
  return decode_groups<4>(src, y, head_dim);
}

}  // namespace

DecodeFn decode_rotated_avx512_kernel() { return cpu_features().has_avx512_set() ? decode_rotated_avx512 : nullptr; }

}  // namespace polykv::turbo::trellis
