// AVX-512 (VL/BW/VNNI) MXFP4 kernel (mxfp4_kernels_x86.h) on 256-bit vectors: vpdpbusd products.
#include <immintrin.h>

#include "backend/cpu/mxfp4_kernels.h"
#include "backend/cpu/mxfp4_kernels_x86.h"

namespace polykv::cpu {
namespace {

struct VnniMxfp4Ops {
  static __m256i dot_u8s8(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_epi32(acc, u, s); }
};

}  // namespace

RowDotFn mxfp4_row_dot_avx512(DType type) { return mxfp4_kernel<VnniMxfp4Ops>(type); }

}  // namespace polykv::cpu
