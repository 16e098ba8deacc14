// AVX-512 (VL/BW/VNNI) ternary kernels (ternary_kernels_x86.h) on 256-bit vectors: vpdpbusd
// products, unsigned byte compares into masks for the base-3 digits.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "backend/cpu/ternary_kernels.h"
#include "backend/cpu/ternary_kernels_x86.h"

namespace polykv::cpu {
namespace {

struct VnniTernaryOps {
  static constexpr bool kStateDot = true;
  static constexpr bool kMasks = true;
  static __m256i dot_u8s8(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_epi32(acc, u, s); }
  static __m256i digit0(__m256i q) {
    const __mmask32 ge86 = _mm256_cmpge_epu8_mask(q, _mm256_set1_epi8(86));
    const __mmask32 ge171 = _mm256_cmpge_epu8_mask(q, _mm256_set1_epi8(int8_t(171)));
    const __m256i one = _mm256_set1_epi8(1);
    const __m256i u = _mm256_maskz_mov_epi8(ge86, one);
    return _mm256_mask_add_epi8(u, ge171, u, one);
  }
};

}  // namespace

RowDotFn ternary_row_dot_avx512(DType type) { return ternary_kernel<VnniTernaryOps>(type); }

}  // namespace polykv::cpu
