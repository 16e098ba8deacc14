// AVX2 MXFP4 kernel (mxfp4_kernels_x86.h): maddubs products (u <= 24: no int16 saturation).
#include <immintrin.h>

#include "backend/cpu/mxfp4_kernels.h"
#include "backend/cpu/mxfp4_kernels_x86.h"

namespace polykv::cpu {
namespace {

struct Avx2Mxfp4Ops {
  // maddubs: u8*s8 pairs -> int16 (|u*s + u*s| <= 2*24*127); madd by 1 -> int32.
  static __m256i dot_u8s8(__m256i acc, __m256i u, __m256i s) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
  }
};

}  // namespace

RowDotFn mxfp4_row_dot_avx2(DType type) { return mxfp4_kernel<Avx2Mxfp4Ops>(type); }

}  // namespace polykv::cpu
