// AVX2 + FMA + F16C kernels: f32/f16/bf16 rows in 8-wide FMA lanes; the integer kernels of
// legacy_kernels_x86.h / kquant_kernels_x86.h instantiated with maddubs-based integer ops.
#include <immintrin.h>

#include "backend/cpu/kquant_kernels_x86.h"
#include "backend/cpu/legacy_kernels_x86.h"
#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/x86_common.h"

namespace polykv::cpu {
namespace {

struct Avx2Ops {
  // maddubs: u8*s8 pairs -> int16 (no saturation: |u*s + u*s| <= 2*127*127); madd by 1 -> int32.
  static __m256i dot_u8s8(__m256i acc, __m256i u, __m256i s) {
    const __m256i p16 = _mm256_maddubs_epi16(u, s);
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
  }
  // Signed x signed via |w| * (s with w's sign). |w| may be 128 (w = -128), still fine: 2*128*127.
  static __m256i dot_s8s8(__m256i acc, __m256i w, __m256i s, int32_t /*sum_s*/) {
    return dot_u8s8(acc, _mm256_sign_epi8(w, w), _mm256_sign_epi8(s, w));
  }
  static __m256i dot_u8s8_scaled(__m256i acc, __m256i u, __m256i s, __m256i sc16) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), sc16));
  }
  // Byte j gets byte j/8 of qh, is tested against bit j%8, and becomes 0x10 where set.
  static __m256i expand_bit5(uint32_t qh) {
    const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(int32_t(qh)), shuf);
    const __m256i bit = _mm256_set1_epi64x(int64_t(0x8040201008040201ull));
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
    return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
  }
};

// Float rows: Load(p) turns 8 weights at p into f32. Four accumulators hide FMA latency.
inline __m256 load_f32(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load_f16(const uint16_t* p) { return _mm256_cvtph_ps(load128(p)); }
inline __m256 load_bf16(const uint16_t* p) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(load128(p)), 16));
}
inline float scalar_f32(float v) { return v; }
inline float scalar_f16(uint16_t v) { return half_to_f32(v); }
inline float scalar_bf16(uint16_t v) {
  const uint32_t u = uint32_t(v) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

template <typename T, __m256 (*kLoad)(const T*), float (*kScalar)(T)>
float dot_float(const void* w_row, const ActRow& a, int64_t n) {
  const T* w = static_cast<const T*>(w_row);
  const float* x = a.f32;
  __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm256_fmadd_ps(kLoad(w + i), _mm256_loadu_ps(x + i), acc0);
    acc1 = _mm256_fmadd_ps(kLoad(w + i + 8), _mm256_loadu_ps(x + i + 8), acc1);
    acc2 = _mm256_fmadd_ps(kLoad(w + i + 16), _mm256_loadu_ps(x + i + 16), acc2);
    acc3 = _mm256_fmadd_ps(kLoad(w + i + 24), _mm256_loadu_ps(x + i + 24), acc3);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(kLoad(w + i), _mm256_loadu_ps(x + i), acc0);
  float tail = 0.0f;
  for (; i < n; ++i) tail += kScalar(w[i]) * x[i];
  return hsum_ps(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3))) + tail;
}

}  // namespace

VecDotFn vec_dot_avx2(DType type) {
  switch (type) {
    case DType::F32: return dot_float<float, load_f32, scalar_f32>;
    case DType::F16: return dot_float<uint16_t, load_f16, scalar_f16>;
    case DType::BF16: return dot_float<uint16_t, load_bf16, scalar_bf16>;
    default:
      if (VecDotFn f = legacy_kernel<Avx2Ops>(type)) return f;
      return kquant_kernel<Avx2Ops>(type);
  }
}

}  // namespace polykv::cpu
