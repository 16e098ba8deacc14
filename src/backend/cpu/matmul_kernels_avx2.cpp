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

// Float row element types: T, load(p) turning 8 weights at p into f32, scalar(v) for the tail.
struct F32Row {
  using T = float;
  static __m256 load(const float* p) { return _mm256_loadu_ps(p); }
  static float scalar(float v) { return v; }
};
struct F16Row {
  using T = uint16_t;
  static __m256 load(const uint16_t* p) { return _mm256_cvtph_ps(load128(p)); }
  static float scalar(uint16_t v) { return half_to_f32(v); }
};
struct BF16Row {
  using T = uint16_t;
  static __m256 load(const uint16_t* p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(load128(p)), 16));
  }
  static float scalar(uint16_t v) {
    const uint32_t u = uint32_t(v) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

// NT tokens against one row: each weight vector is loaded (and converted) once and FMA'd into every
// token's accumulators; U independent accumulators per token hide the FMA latency.
template <typename Row>
struct FloatDot {
  using T = typename Row::T;
  template <int NT>
  static void run(const void* w_row, const ActRow* a, int64_t n, float* out) {
    constexpr int U = NT == 1 ? 4 : 2;
    const T* w = static_cast<const T*>(w_row);
    __m256 acc[NT][U];
    for (auto& row : acc)
      for (auto& v : row) v = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 * U <= n; i += 8 * U)
      for (int u = 0; u < U; ++u) {
        const __m256 wv = Row::load(w + i + 8 * u);
        for (int t = 0; t < NT; ++t) acc[t][u] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(a[t].f32 + i + 8 * u), acc[t][u]);
      }
    for (; i + 8 <= n; i += 8) {
      const __m256 wv = Row::load(w + i);
      for (int t = 0; t < NT; ++t) acc[t][0] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(a[t].f32 + i), acc[t][0]);
    }
    for (int t = 0; t < NT; ++t) {
      for (int u = 1; u < U; ++u) acc[t][0] = _mm256_add_ps(acc[t][0], acc[t][u]);
      float tail = 0.0f;
      for (int64_t j = i; j < n; ++j) tail += Row::scalar(w[j]) * a[t].f32[j];
      out[t] = hsum_ps(acc[t][0]) + tail;
    }
  }
};

}  // namespace

RowDotFn row_dot_avx2(DType type) {
  switch (type) {
    case DType::F32: return by_tokens<FloatDot<F32Row>>;
    case DType::F16: return by_tokens<FloatDot<F16Row>>;
    case DType::BF16: return by_tokens<FloatDot<BF16Row>>;
    default:
      if (RowDotFn f = legacy_kernel<Avx2Ops>(type)) return f;
      return kquant_kernel<Avx2Ops>(type);
  }
}

}  // namespace polykv::cpu
