// AVX-512 (F/BW/VL/DQ/VNNI) kernels: the float kernels of float_kernels_x86.h in 16-wide FMA lanes
// with masked tails; the integer kernels of legacy_kernels_x86.h / kquant_kernels_x86.h instantiated
// with VNNI ops (vpdpbusd / vpdpwssd on 256-bit vectors: one block of 32 values per instruction).
// gcc 12's own avx512fintrin.h trips -Wuninitialized on its _mm512_undefined_* helpers (a known
// false positive in the compiler headers, not in this file).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "backend/cpu/float_kernels_x86.h"
#include "backend/cpu/kquant_kernels_x86.h"
#include "backend/cpu/legacy_kernels_x86.h"
#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/x86_common.h"

namespace polykv::cpu {
namespace {

struct VnniOps {
  static __m256i dot_u8s8(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_epi32(acc, u, s); }
  // dpbusd needs an unsigned operand: w ^ 0x80 = w + 128 as u8, so Σ(w+128)·s = Σ w·s + 128·Σ s.
  static __m256i dot_s8s8(__m256i acc, __m256i w, __m256i s, int32_t sum_s) {
    const __m256i u = _mm256_xor_si256(w, _mm256_set1_epi8(int8_t(0x80)));
    return _mm256_dpbusd_epi32(_mm256_sub_epi32(acc, lane0_epi32(128 * sum_s)), u, s);
  }
  static __m256i dot_u8s8_scaled(__m256i acc, __m256i u, __m256i s, __m256i sc16) {
    return _mm256_dpwssd_epi32(acc, _mm256_maddubs_epi16(u, s), sc16);
  }
  static __m256i expand_bit5(uint32_t qh) { return _mm256_maskz_mov_epi8(__mmask32(qh), _mm256_set1_epi8(0x10)); }
};

// Vector policy of float_kernels_x86.h: 16-lane FMA, masked tails.
struct Avx512Float {
  using V = __m512;
  static constexpr int kLanes = 16;
  static __m512 zero() { return _mm512_setzero_ps(); }
  static __m512 fma(__m512 a, __m512 b, __m512 c) { return _mm512_fmadd_ps(a, b, c); }
  static float reduce(__m512 v) { return _mm512_reduce_add_ps(v); }
  static __mmask16 mask(int count) { return __mmask16((1u << count) - 1); }
  static __m512 load(const float* p) { return _mm512_loadu_ps(p); }
  static __m512 load_part(const float* p, int count) { return _mm512_maskz_loadu_ps(mask(count), p); }
};

// Float row element types: T, and 16 (or count) weights at p as f32 (masked-off lanes read nothing).
struct F32Row {
  using T = float;
  static __m512 load(const float* p) { return _mm512_loadu_ps(p); }
  static __m512 load_part(const float* p, int count) { return Avx512Float::load_part(p, count); }
};
struct F16Row {
  using T = uint16_t;
  static __m512 load(const uint16_t* p) { return _mm512_cvtph_ps(load256(p)); }
  static __m512 load_part(const uint16_t* p, int count) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(Avx512Float::mask(count), p));
  }
};
struct BF16Row {
  using T = uint16_t;
  static __m512 widen(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static __m512 load(const uint16_t* p) { return widen(load256(p)); }
  static __m512 load_part(const uint16_t* p, int count) {
    return widen(_mm256_maskz_loadu_epi16(Avx512Float::mask(count), p));
  }
};

// Decode: 8 rows (8 FMA chains) × 1 token; prefill: 4 rows × 6 tokens (24 zmm accumulators).
using Floats = FloatKernels<Avx512Float, F32Row, F16Row, BF16Row, 8, 4, 6>;

}  // namespace

TileKernel tile_kernel_avx512(DType type, bool one_token) { return Floats::tile(type, one_token); }

RowDotFn row_dot_avx512(DType type) {
  if (RowDotFn f = Floats::row(type)) return f;
  if (RowDotFn f = legacy_kernel<VnniOps>(type)) return f;
  return kquant_kernel<VnniOps>(type);
}

}  // namespace polykv::cpu
