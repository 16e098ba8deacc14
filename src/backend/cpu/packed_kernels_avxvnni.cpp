// AVX2 group kernels for the x16 packed layout with AVX-VNNI (VEX vpdpbusd on ymm: u8 x s8 summed
// by fours into s32, Alder Lake / Sapphire Rapids / Zen 5): the packed_kernels_avx2.h template with
// a one-instruction dot step. Quants are unsigned (q4_0: q + 8, q8_0: q + 128): the sums start at
// -offset * Σa, exactly as in the AVX-512 kernel.
#include <algorithm>

#include "backend/cpu/packed_kernels_avx2.h"
#include "core/cpu_features.h"

namespace polykv::cpu {
namespace {

struct VnniDot {
  static __m256i init(int32_t offset, int32_t sum) { return _mm256_set1_epi32(-offset * sum); }
  static __m256i dot4(__m256i s, __m256i w, __m256i a) { return _mm256_dpbusd_avx_epi32(s, w, a); }
  static __m256i prep8(__m256i u) { return u; }
  static __m256i dot8(__m256i s, __m256i w, __m256i a) { return _mm256_dpbusd_avx_epi32(s, w, a); }
  // k-quants (packed_kquant_avx2.h): int32 partial sums, multiplied by the int32 scale.
  static constexpr int kQ6Flush = 4, kQ5Flush = 8;
  static __m256i kq_dot(__m256i s, __m256i u, __m256i a) { return _mm256_dpbusd_avx_epi32(s, u, a); }
  static __m256i kq_prep_scale(__m256i sc32) { return sc32; }
  static __m256i kq_apply(__m256i isum, __m256i s, __m256i sc) { return _mm256_add_epi32(isum, _mm256_mullo_epi32(s, sc)); }
  static __m256i madd_acc(__m256i acc, __m256i a, __m256i b) { return _mm256_dpwssd_avx_epi32(acc, a, b); }
};

}  // namespace

PackedDotFn packed_dot_avxvnni(DType type) {
  const CpuFeatures& f = cpu_features();
  return f.has_avx2_set() && f.avx_vnni ? packed_table<VnniDot>(type) : nullptr;
}

}  // namespace polykv::cpu
