// AVX2 + FMA + F16C kernels: the float kernels of float_kernels_x86.h in 8-wide FMA lanes; the
// integer kernels of legacy_kernels_x86.h / kquant_kernels_x86.h instantiated with maddubs-based
// integer ops.
#include <immintrin.h>

#include <array>
#include <cstring>

#include "backend/cpu/float_kernels_x86.h"
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

// Vector policy of float_kernels_x86.h: 8-lane FMA; a tail of count < 8 values is copied into a
// zeroed 8-value buffer and loaded whole (AVX2 has no masked 16-bit load).
struct Avx2Float {
  using V = __m256;
  static constexpr int kLanes = 8;
  static __m256 zero() { return _mm256_setzero_ps(); }
  static __m256 fma(__m256 a, __m256 b, __m256 c) { return _mm256_fmadd_ps(a, b, c); }
  static float reduce(__m256 v) { return hsum_ps(v); }
  static __m256 load(const float* p) { return _mm256_loadu_ps(p); }
  static __m256 load_part(const float* p, int count) { return load(padded(p, count).data()); }
  template <typename T>
  static std::array<T, 8> padded(const T* p, int count) {
    std::array<T, 8> buf{};
    std::memcpy(buf.data(), p, size_t(count) * sizeof(T));
    return buf;
  }
};

// Float row element types: T, and 8 (or count) weights at p as f32.
struct F32Row {
  using T = float;
  static __m256 load(const float* p) { return _mm256_loadu_ps(p); }
  static __m256 load_part(const float* p, int count) { return Avx2Float::load_part(p, count); }
};
struct F16Row {
  using T = uint16_t;
  static __m256 load(const uint16_t* p) { return _mm256_cvtph_ps(load128(p)); }
  static __m256 load_part(const uint16_t* p, int count) { return load(Avx2Float::padded(p, count).data()); }
};
struct BF16Row {
  using T = uint16_t;
  static __m256 load(const uint16_t* p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(load128(p)), 16));
  }
  static __m256 load_part(const uint16_t* p, int count) { return load(Avx2Float::padded(p, count).data()); }
};

// 16 ymm registers: decode 8 rows (8 FMA chains) × 1 token; prefill 4 rows × 3 tokens (12 accumulators).
using Floats = FloatKernels<Avx2Float, F32Row, F16Row, BF16Row, 8, 4, 3>;

}  // namespace

TileKernel tile_kernel_avx2(DType type, bool one_token) { return Floats::tile(type, one_token); }

RowDotFn row_dot_avx2(DType type) {
  if (RowDotFn f = Floats::row(type)) return f;
  if (RowDotFn f = legacy_kernel<Avx2Ops>(type)) return f;
  return kquant_kernel<Avx2Ops>(type);
}

}  // namespace polykv::cpu
