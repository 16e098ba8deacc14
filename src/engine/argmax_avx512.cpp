// AVX-512 argmax (engine/argmax.h): chunk maxima with vmaxps, a rescan of a chunk only when its
// maximum beats the best so far.
#include <immintrin.h>

#include <algorithm>

#include "engine/argmax.h"

namespace polykv {
namespace {

constexpr int32_t kChunk = 2048;  // floats per chunk (8 KiB: its rescan reads L1)

int32_t argmax_first_avx512(const float* x, int32_t n) {
  int32_t best = -1;
  float best_v = -__builtin_inff();
  const int32_t n_vec = n > 0 ? n & ~63 : 0;  // whole groups of 4 vectors
  for (int32_t i0 = 0; i0 < n_vec; i0 += kChunk) {
    const int32_t end = std::min(i0 + kChunk, n_vec);
    // max(x, m) returns m when x is NaN (the second operand), so m never becomes NaN.
    __m512 m0 = _mm512_set1_ps(-__builtin_inff()), m1 = m0, m2 = m0, m3 = m0;
    for (int32_t i = i0; i < end; i += 64) {
      m0 = _mm512_max_ps(_mm512_loadu_ps(x + i), m0);
      m1 = _mm512_max_ps(_mm512_loadu_ps(x + i + 16), m1);
      m2 = _mm512_max_ps(_mm512_loadu_ps(x + i + 32), m2);
      m3 = _mm512_max_ps(_mm512_loadu_ps(x + i + 48), m3);
    }
    const float cm = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m0, m1), _mm512_max_ps(m2, m3)));
    if (!(cm > best_v)) continue;  // an earlier chunk holds an equal or larger value: it keeps the win
    // cm is one of the chunk's elements (finite or +inf): its first occurrence is the chunk's answer.
    const __m512 c = _mm512_set1_ps(cm);
    for (int32_t i = i0;; i += 16) {
      const __mmask16 eq = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + i), c, _CMP_EQ_OQ);
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

ArgmaxFn argmax_avx512() { return argmax_first_avx512; }

}  // namespace polykv
