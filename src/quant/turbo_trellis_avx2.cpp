// AVX2 decoder of trellis-coded turbo rows into the rotated basis (layout in turbo_trellis.h; the
// scalar decode_rotated in turbo_trellis.cpp is the reference). 8 coordinates at a time:
//   window w_j = bits [i+j-3, i+j] of the t stream: one 16-bit load of t bits i-8..i+7, broadcast,
//                shifted by 5+j per lane, masked to 4 bits;
//   subset     = 2 bits of the constant kSubsetWord at 2*w (a variable shift);
//   index j    = the (bits-1)-bit index of each lane, unpacked by a variable shift;
//   level k    = subset + 4*j, looked up in 8-entry tables (1, 2 or 4 of them, blended on k's bits 3, 4).
#include <immintrin.h>

#include <cstring>

#include "core/cpu_features.h"
#include "quant/turbo.h"
#include "quant/turbo_trellis.h"
#include "quant/turbo_trellis_internal.h"

namespace polykv::turbo::trellis {
namespace {

// The (bits-1)-bit indices of coordinates i..i+7 (i a multiple of 8) in 8 lanes.
template <int kBits>
__m256i indices8(const uint8_t* jbits, int i) {
  constexpr int w = kBits - 1;
  uint32_t word = 0;
  std::memcpy(&word, jbits + w * i / 8, size_t(w));  // the 8 indices' w bytes
  const __m256i shifts = _mm256_setr_epi32(0, w, 2 * w, 3 * w, 4 * w, 5 * w, 6 * w, 7 * w);
  return _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(int(word)), shifts), _mm256_set1_epi32((1 << w) - 1));
}

template <int kBits>
void decode_groups(const uint8_t* src, float* y, int head_dim) {
  const detail::Shape s = detail::shape(kBits, head_dim);  // head_dim was validated when the row was made
  const float* lv = detail::level_table(kBits, s.group);
  __m256 table[4];
  for (int t = 0; t < (2 << kBits) / 8; ++t) table[t] = _mm256_loadu_ps(lv + 8 * t);
  const __m256i window_shift = _mm256_setr_epi32(5, 6, 7, 8, 9, 10, 11, 12);
  const __m256i subsets = _mm256_set1_epi32(int(kSubsetWord));
  const __m256i three = _mm256_set1_epi32(3), fifteen = _mm256_set1_epi32(15);
  for (int g = 0; g < s.n_groups; ++g) {
    const detail::Record r = detail::record(src, s, g);
    const uint8_t* tbits = r.tbits;
    const __m256 norm = _mm256_set1_ps(r.norm);
    float* out = y + g * s.group;
    for (int i = 0; i < s.group; i += 8) {
      const uint32_t t = (i ? uint32_t(tbits[i / 8 - 1]) : 0u) | (uint32_t(tbits[i / 8]) << 8);
      const __m256i w = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(int(t)), window_shift), fifteen);
      const __m256i subset = _mm256_and_si256(_mm256_srlv_epi32(subsets, _mm256_slli_epi32(w, 1)), three);
      const __m256i k = _mm256_add_epi32(subset, _mm256_slli_epi32(indices8<kBits>(r.jbits, i), 2));
      __m256 v = _mm256_permutevar8x32_ps(table[0], k);
      if constexpr (kBits >= 3) {  // k bit 3 (its sign-bit copy) picks table 1 (3 of 4 bits)
        const __m256 hi = _mm256_permutevar8x32_ps(table[1], k);
        v = _mm256_blendv_ps(v, hi, _mm256_castsi256_ps(_mm256_slli_epi32(k, 28)));
      }
      if constexpr (kBits == 4) {  // tables 2, 3 for k >= 16, chosen on bit 4
        const __m256 hi2 = _mm256_blendv_ps(_mm256_permutevar8x32_ps(table[2], k), _mm256_permutevar8x32_ps(table[3], k),
                                            _mm256_castsi256_ps(_mm256_slli_epi32(k, 28)));
        v = _mm256_blendv_ps(v, hi2, _mm256_castsi256_ps(_mm256_slli_epi32(k, 27)));
      }
      _mm256_storeu_ps(out + i, _mm256_mul_ps(norm, v));
    }
  }
}

void decode_rotated_avx2(int bits, const uint8_t* src, float* y, int head_dim) {
  if (bits == 2) return decode_groups<2>(src, y, head_dim);
  if (bits == 3) return decode_groups<3>(src, y, head_dim);
  return decode_groups<4>(src, y, head_dim);
}

}  // namespace

DecodeFn decode_rotated_avx2_kernel() { return cpu_features().has_avx2_set() ? decode_rotated_avx2 : nullptr; }

void decode_rotated_fast(int bits, const uint8_t* src, float* y, int head_dim) {
  static const DecodeFn best = decode_rotated_avx512_kernel() ? decode_rotated_avx512_kernel()
                               : decode_rotated_avx2_kernel() ? decode_rotated_avx2_kernel()
                                                              : decode_rotated;
  best(bits, src, y, head_dim);
}

}  // namespace polykv::turbo::trellis
