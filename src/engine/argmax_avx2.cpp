// AVX2 argmax (engine/argmax.h): chunk maxima with vmaxps, a rescan of a chunk only when its maximum
// beats the best so far.
#include <immintrin.h>

#include <algorithm>

#include "engine/argmax.h"

namespace polykv {
namespace {

constexpr int32_t kChunk = 2048;  // floats per chunk (8 KiB: its rescan reads L1)

float hmax(__m256 v) {  // v holds no NaN
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}

int32_t argmax_first_avx2(const float* x, int32_t n) {
  int32_t best = -1;
  float best_v = -__builtin_inff();
  const int32_t n_vec = n > 0 ? n & ~31 : 0;  // whole groups of 4 vectors
  for (int32_t i0 = 0; i0 < n_vec; i0 += kChunk) {
    const int32_t end = std::min(i0 + kChunk, n_vec);
    // max(x, m) returns m when x is NaN (the second operand), so m never becomes NaN.
    __m256 m0 = _mm256_set1_ps(-__builtin_inff()), m1 = m0, m2 = m0, m3 = m0;
    for (int32_t i = i0; i < end; i += 32) {
      m0 = _mm256_max_ps(_mm256_loadu_ps(x + i), m0);
      m1 = _mm256_max_ps(_mm256_loadu_ps(x + i + 8), m1);
      m2 = _mm256_max_ps(_mm256_loadu_ps(x + i + 16), m2);
      m3 = _mm256_max_ps(_mm256_loadu_ps(x + i + 24), m3);
    }
    const float cm = hmax(_mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3)));
    if (!(cm > best_v)) continue;  // an earlier chunk holds an equal or larger value: it keeps the win
    // cm is one of the chunk's elements (finite or +inf): its first occurrence is the chunk's answer.
    const __m256 c = _mm256_set1_ps(cm);
    for (int32_t i = i0;; i += 8) {
      const int eq = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), c, _CMP_EQ_OQ));
      if (eq) {
        best = i + __builtin_ctz(unsigned(eq));
        break;
      }
    }
    best_v = cm;
  }
  for (int32_t i = n_vec; i < n; ++i)  // the tail, after every vector index: strict > keeps the first
    if (x[i] > best_v) {
      best_v = x[i];
      best = i;
    }
  return best;
}

}  // namespace

ArgmaxFn argmax_avx2() { return argmax_first_avx2; }

}  // namespace polykv
