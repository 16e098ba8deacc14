// AVX2 ternary kernels (ternary_kernels_x86.h): maddubs products, compare-based base-3 digits.
#include <immintrin.h>

#include "backend/cpu/ternary_kernels.h"
#include "backend/cpu/ternary_kernels_x86.h"

namespace polykv::cpu {
namespace {

struct Avx2TernaryOps {
  static constexpr bool kStateDot = false;
  static constexpr bool kMasks = false;
  // maddubs: u8*s8 pairs -> int16 (u <= 3: no saturation); madd by 1 -> int32.
  static __m256i dot_u8s8(__m256i acc, __m256i u, __m256i s) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
  }
  // (q >= 86) + (q >= 171) with signed compares of q - 128 (AVX2 has no unsigned byte compare).
  static __m256i digit0(__m256i q) {
    const __m256i qs = _mm256_xor_si256(q, _mm256_set1_epi8(int8_t(0x80)));
    const __m256i ge86 = _mm256_cmpgt_epi8(qs, _mm256_set1_epi8(85 - 128));
    const __m256i ge171 = _mm256_cmpgt_epi8(qs, _mm256_set1_epi8(170 - 128));
    return _mm256_sub_epi8(_mm256_sub_epi8(_mm256_setzero_si256(), ge86), ge171);  // masks are -1
  }
};

}  // namespace

RowDotFn ternary_row_dot_avx2(DType type) { return ternary_kernel<Avx2TernaryOps>(type); }

}  // namespace polykv::cpu
