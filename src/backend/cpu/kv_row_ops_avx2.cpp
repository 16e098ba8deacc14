// AVX2 + FMA + F16C row primitives for f16/f32 K and V rows (others fall back to scalar).
#include <immintrin.h>

#include "backend/cpu/kv_row_ops.h"
#include "core/cpu_features.h"

namespace polykv {
namespace {

float hsum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

__m256 load8(DType t, const uint8_t* p, int i) {
  if (t == DType::F16) return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i)));
  return _mm256_loadu_ps(reinterpret_cast<const float*>(p) + i);
}

float dot(DType t, const uint8_t* k, const float* q, int n) {
  if ((t != DType::F16 && t != DType::F32) || n % 8 != 0) return kv_row_ops_scalar().dot(t, k, q, n);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(load8(t, k, i), _mm256_loadu_ps(q + i), acc0);
    acc1 = _mm256_fmadd_ps(load8(t, k, i + 8), _mm256_loadu_ps(q + i + 8), acc1);
  }
  for (; i < n; i += 8) acc0 = _mm256_fmadd_ps(load8(t, k, i), _mm256_loadu_ps(q + i), acc0);
  return hsum(_mm256_add_ps(acc0, acc1));
}

void axpy(DType t, float a, const uint8_t* v, float* out, int n) {
  if ((t != DType::F16 && t != DType::F32) || n % 8 != 0) return kv_row_ops_scalar().axpy(t, a, v, out, n);
  const __m256 va = _mm256_set1_ps(a);
  for (int i = 0; i < n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_fmadd_ps(va, load8(t, v, i), _mm256_loadu_ps(out + i)));
}

}  // namespace

const KvRowOps* kv_row_ops_avx2() {
  static const KvRowOps ops{dot, axpy};
  return cpu_features().has_avx2_set() ? &ops : nullptr;
}

}  // namespace polykv
