// Float vectors for kernels written once over a vector type and compiled per ISA (kv/gated_delta_simd.h,
// backend/cpu/gated_delta_chunked.h): F32x8 in AVX2 TUs, F32x16 in AVX-512 TUs. Plain IEEE multiplies and
// adds, no fused form: kernels that promise a scalar reference's bits also turn contraction off in their TU.
// Include only from an ISA TU (*_avx2.cpp, *_avx512.cpp). Internal linkage.
#pragma once
#include <immintrin.h>

namespace polykv::simd_x86 {
namespace {

#if defined(__AVX2__)
struct F32x8 {
  using T = __m256;
  static constexpr int kWidth = 8;
  static T zero() { return _mm256_setzero_ps(); }
  static T set1(float x) { return _mm256_set1_ps(x); }
  static T load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, T x) { _mm256_storeu_ps(p, x); }
  static T mul(T a, T b) { return _mm256_mul_ps(a, b); }
  static T add(T a, T b) { return _mm256_add_ps(a, b); }
};
#endif

#if defined(__AVX512F__)
struct F32x16 {
  using T = __m512;
  static constexpr int kWidth = 16;
  static T zero() { return _mm512_setzero_ps(); }
  static T set1(float x) { return _mm512_set1_ps(x); }
  static T load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, T x) { _mm512_storeu_ps(p, x); }
  static T mul(T a, T b) { return _mm512_mul_ps(a, b); }
  static T add(T a, T b) { return _mm512_add_ps(a, b); }
};
#endif

}  // namespace
}  // namespace polykv::simd_x86
