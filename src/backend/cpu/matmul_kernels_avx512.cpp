// AVX-512 (F/BW/VL/DQ/VNNI) kernels: f32/f16/bf16 rows in 16-wide FMA lanes with masked tails; the
// integer kernels of legacy_kernels_x86.h / kquant_kernels_x86.h instantiated with VNNI ops
// (vpdpbusd / vpdpwssd on 256-bit vectors: one block of 32 values per instruction).
// gcc 12's own avx512fintrin.h trips -Wuninitialized on its _mm512_undefined_* helpers (a known
// false positive in the compiler headers, not in this file).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

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

// Float rows: Load(p, mask) turns up to 16 weights at p into f32 (masked-off lanes read nothing).
inline __m512 load_f32(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
inline __m512 load_f16(const uint16_t* p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }
inline __m512 load_bf16(const uint16_t* p, __mmask16 m) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
}

template <typename T, __m512 (*kLoad)(const T*, __mmask16)>
float dot_float(const void* w_row, const ActRow& a, int64_t n) {
  const T* w = static_cast<const T*>(w_row);
  const float* x = a.f32;
  const __mmask16 all = 0xFFFF;
  __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    acc0 = _mm512_fmadd_ps(kLoad(w + i, all), _mm512_loadu_ps(x + i), acc0);
    acc1 = _mm512_fmadd_ps(kLoad(w + i + 16, all), _mm512_loadu_ps(x + i + 16), acc1);
    acc2 = _mm512_fmadd_ps(kLoad(w + i + 32, all), _mm512_loadu_ps(x + i + 32), acc2);
    acc3 = _mm512_fmadd_ps(kLoad(w + i + 48, all), _mm512_loadu_ps(x + i + 48), acc3);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? all : __mmask16((1u << (n - i)) - 1);
    acc0 = _mm512_fmadd_ps(kLoad(w + i, m), _mm512_maskz_loadu_ps(m, x + i), acc0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
}

}  // namespace

VecDotFn vec_dot_avx512(DType type) {
  switch (type) {
    case DType::F32: return dot_float<float, load_f32>;
    case DType::F16: return dot_float<uint16_t, load_f16>;
    case DType::BF16: return dot_float<uint16_t, load_bf16>;
    default:
      if (VecDotFn f = legacy_kernel<VnniOps>(type)) return f;
      return kquant_kernel<VnniOps>(type);
  }
}

}  // namespace polykv::cpu
