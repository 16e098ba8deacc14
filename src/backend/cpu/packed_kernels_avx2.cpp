// AVX2 group kernels for the x16 packed layout without VNNI: the integer dot step is vpmaddubsw
// (u8 x s8 -> pairs of s16) + vpmaddwd with ones (-> s32). q8_0's quants are made signed again
// (u ^ 0x80) and multiplied as |q| by a * sign(q), so no pair sum saturates (|q| <= 128, |a| <= 127).
// packed_dot_avx2() takes the AVX-VNNI variant (packed_kernels_avxvnni.cpp) where the CPU has it.
#include <algorithm>

#include "backend/cpu/packed_kernels_avx2.h"
#include "core/cpu_features.h"

namespace polykv::cpu {
namespace {

struct MaddubsDot {
  // q4_0 / mxfp4 sum u·a with u = q + 8 / k + 12: start at -offset Σa. q8_0 multiplies the signed q
  // directly (prep8): start at 0.
  static __m256i init(int32_t offset, int32_t sum) { return _mm256_set1_epi32(offset == 128 ? 0 : -offset * sum); }
  static __m256i dot4(__m256i s, __m256i w, __m256i a) {
    return _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(w, a), _mm256_set1_epi16(1)));
  }
  struct W8 {
    __m256i abs, sgn;
  };
  static W8 prep8(__m256i u) {
    const __m256i q = _mm256_xor_si256(u, _mm256_set1_epi8(char(0x80)));
    return {_mm256_abs_epi8(q), q};
  }
  static __m256i dot8(__m256i s, const W8& w, __m256i a) {
    return _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(w.abs, _mm256_sign_epi8(a, w.sgn)),
                                                 _mm256_set1_epi16(1)));
  }
  // k-quants (packed_kquant_avx2.h): int16 partial sums, applied with vpmaddwd by (sc, sc) pairs.
  static constexpr int kQ6Flush = 2, kQ5Flush = 4;
  static __m256i kq_dot(__m256i s, __m256i u, __m256i a) { return _mm256_add_epi16(s, _mm256_maddubs_epi16(u, a)); }
  static __m256i kq_prep_scale(__m256i sc32) {
    return _mm256_or_si256(_mm256_and_si256(sc32, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(sc32, 16));
  }
  static __m256i kq_apply(__m256i isum, __m256i s, __m256i sc) { return _mm256_add_epi32(isum, _mm256_madd_epi16(s, sc)); }
  static __m256i madd_acc(__m256i acc, __m256i a, __m256i b) { return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b)); }
};

}  // namespace

PackedDotFn packed_dot_avx2_maddubs(DType type) {
  return cpu_features().has_avx2_set() ? packed_table<MaddubsDot>(type) : nullptr;
}

PackedDotFn packed_dot_avx2(DType type) {
  if (const PackedDotFn f = packed_dot_avxvnni(type)) return f;
  return packed_dot_avx2_maddubs(type);
}

}  // namespace polykv::cpu
