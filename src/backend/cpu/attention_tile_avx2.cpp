// AVX2 + FMA kernels of attention_tile.h (the score and value tiles; softmax_tile_avx2 is in
// attention_tile.cpp). 16 ymm registers bound the blocks:
//   values: NR <= 4 rows x NC <= 2 vectors of 8 values of acc in registers while the tile's keys
//           stream by (8 accumulators, 2 loads of v and 1 broadcast of w per key);
//   scores: NR <= 2 rows x NJ <= 4 keys, one accumulator per (row, key) pair (8), reduced by reduce4.
// Values past the last multiple of 8 use masked loads and stores (vmaskmovps).
// Invariance (attention_tile.h): acc element (r, i) is one FMA chain over the keys in order, whatever
// the block; score (r, j) is one accumulator reduced by one fixed tree, whatever NR, NJ and n_keys.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "backend/cpu/attention_tile.h"
#include "core/cpu_features.h"

namespace polykv {
namespace {

// Lane mask of the first n (0 <= n <= 8) floats.
[[gnu::always_inline]] inline __m256i first_lanes(int n) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), idx);
}

// Values: rows [r0, r0 + NR), values [i0, i0 + 8 * NC); the last vector holds `tail` lanes (1..8).
template <int NR, int NC>
void value_block(const float* v, int n_keys, int hdv, const float* w, size_t w_stride, float* acc, size_t acc_stride,
                 int r0, int i0, __m256i tail) {
  const __m256i full = _mm256_set1_epi32(-1);
  __m256 a[NR][NC];
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 2
    for (int c = 0; c < NC; ++c)
      a[r][c] = _mm256_maskload_ps(acc + size_t(r0 + r) * acc_stride + size_t(i0 + 8 * c), c == NC - 1 ? tail : full);
  for (int j = 0; j < n_keys; ++j) {
    const float* vj = v + size_t(j) * size_t(hdv) + i0;
    __m256 x[NC];
#pragma GCC unroll 2
    for (int c = 0; c < NC; ++c) x[c] = _mm256_maskload_ps(vj + 8 * c, c == NC - 1 ? tail : full);
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) {
      const __m256 wr = _mm256_broadcast_ss(w + size_t(r0 + r) * w_stride + size_t(j));
#pragma GCC unroll 2
      for (int c = 0; c < NC; ++c) a[r][c] = _mm256_fmadd_ps(wr, x[c], a[r][c]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 2
    for (int c = 0; c < NC; ++c)
      _mm256_maskstore_ps(acc + size_t(r0 + r) * acc_stride + size_t(i0 + 8 * c), c == NC - 1 ? tail : full, a[r][c]);
}

template <int NR>
void value_rows(const float* v, int n_keys, int hdv, const float* w, size_t w_stride, float* acc, size_t acc_stride,
                int r0) {
  for (int i0 = 0; i0 < hdv; i0 += 16) {
    const int left = std::min(16, hdv - i0);
    const __m256i tail = first_lanes(left > 8 ? left - 8 : left);
    if (left > 8) value_block<NR, 2>(v, n_keys, hdv, w, w_stride, acc, acc_stride, r0, i0, tail);
    else value_block<NR, 1>(v, n_keys, hdv, w, w_stride, acc, acc_stride, r0, i0, tail);
  }
}

void accumulate_tile(const float* v, int n_keys, int hdv, const float* w, size_t w_stride, int n_rows, float* acc,
                     size_t acc_stride) {
  int r0 = 0;
  for (; r0 + 4 <= n_rows; r0 += 4) value_rows<4>(v, n_keys, hdv, w, w_stride, acc, acc_stride, r0);
  switch (n_rows - r0) {
    case 1: value_rows<1>(v, n_keys, hdv, w, w_stride, acc, acc_stride, r0); break;
    case 2: value_rows<2>(v, n_keys, hdv, w, w_stride, acc, acc_stride, r0); break;
    case 3: value_rows<3>(v, n_keys, hdv, w, w_stride, acc, acc_stride, r0); break;
    default: break;
  }
}

// Lane m of the result = the horizontal sum of x_m, by the same tree for every lane and every input:
// ((e0 + e1) + (e2 + e3)) + ((e4 + e5) + (e6 + e7)). A lane reads only its own vector.
[[gnu::always_inline]] inline __m128 reduce4(__m256 x0, __m256 x1, __m256 x2, __m256 x3) {
  const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(x0, x1), _mm256_hadd_ps(x2, x3));
  return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

// S for rows [r0, r0 + NR) x keys [j0, j0 + NJ), NR <= 2, NJ <= 4. Missing keys are zero vectors that
// only reach their own (unstored) lanes, so edge blocks give the bits of full ones.
template <int NR, int NJ>
void score_block(const float* k, int hd, const float* const* q, int r0, int j0, float* S, size_t s_stride) {
  __m256 a[NR][4];
#pragma GCC unroll 2
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) a[r][j] = _mm256_setzero_ps();
  const int hd8 = hd / 8 * 8;
  for (int i = 0; i < hd; i += 8) {
    const __m256i m = i < hd8 ? _mm256_set1_epi32(-1) : first_lanes(hd - i);
    __m256 kv[NJ];
#pragma GCC unroll 4
    for (int j = 0; j < NJ; ++j) kv[j] = _mm256_maskload_ps(k + size_t(j0 + j) * size_t(hd) + i, m);
#pragma GCC unroll 2
    for (int r = 0; r < NR; ++r) {
      const __m256 qv = _mm256_maskload_ps(q[r0 + r] + i, m);
#pragma GCC unroll 4
      for (int j = 0; j < NJ; ++j) a[r][j] = _mm256_fmadd_ps(qv, kv[j], a[r][j]);
    }
  }
  const __m128i keys = _mm_cmpgt_epi32(_mm_set1_epi32(NJ), _mm_setr_epi32(0, 1, 2, 3));
#pragma GCC unroll 2
  for (int r = 0; r < NR; ++r)
    _mm_maskstore_ps(S + size_t(r0 + r) * s_stride + size_t(j0), keys, reduce4(a[r][0], a[r][1], a[r][2], a[r][3]));
}

template <int NR>
void score_rows(const float* k, int n_keys, int hd, const float* const* q, int r0, float* S, size_t s_stride) {
  int j0 = 0;
  for (; j0 + 4 <= n_keys; j0 += 4) score_block<NR, 4>(k, hd, q, r0, j0, S, s_stride);
  switch (n_keys - j0) {
    case 1: score_block<NR, 1>(k, hd, q, r0, j0, S, s_stride); break;
    case 2: score_block<NR, 2>(k, hd, q, r0, j0, S, s_stride); break;
    case 3: score_block<NR, 3>(k, hd, q, r0, j0, S, s_stride); break;
    default: break;
  }
}

void score_tile(const float* k, int n_keys, int hd, const float* const* q_rows, int n_rows, float* S,
                size_t s_stride) {
  int r0 = 0;
  for (; r0 + 2 <= n_rows; r0 += 2) score_rows<2>(k, n_keys, hd, q_rows, r0, S, s_stride);
  if (r0 < n_rows) score_rows<1>(k, n_keys, hd, q_rows, r0, S, s_stride);
}

}  // namespace

ScoreTileFn score_tile_avx2() { return cpu_features().has_avx2_set() ? score_tile : nullptr; }

AccumulateTileFn accumulate_tile_avx2() { return cpu_features().has_avx2_set() ? accumulate_tile : nullptr; }

}  // namespace polykv
