// AVX-512 kernel of attention_tile.h: blocks of NR <= 4 rows x NC <= 4 vectors of 16 values of acc
// live in (up to 16) zmm registers while the tile's keys stream by; per key and block: NC loads of
// v, NR broadcasts of w, NR * NC FMAs. hdv values past the last multiple of 16 use masked loads.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backend/cpu/attention_tile.h"
#include "core/cpu_features.h"

namespace polykv {
namespace {

// One block: rows [r0, r0 + NR), values [i0, i0 + 16 * NC) with the last vector masked by `tail`.
template <int NR, int NC>
void block(const float* v, int n_keys, int hdv, const float* w, size_t w_stride, float* acc, size_t acc_stride,
           int r0, int i0, __mmask16 tail) {
  __m512 a[NR][NC];
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < NC; ++c) {
      const __mmask16 m = c == NC - 1 ? tail : __mmask16(0xFFFF);
      a[r][c] = _mm512_maskz_loadu_ps(m, acc + size_t(r0 + r) * acc_stride + size_t(i0 + 16 * c));
    }
  for (int j = 0; j < n_keys; ++j) {
    const float* vj = v + size_t(j) * size_t(hdv) + i0;
    __m512 x[NC];
#pragma GCC unroll 4
    for (int c = 0; c < NC; ++c) x[c] = _mm512_maskz_loadu_ps(c == NC - 1 ? tail : __mmask16(0xFFFF), vj + 16 * c);
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) {
      const __m512 wr = _mm512_set1_ps(w[size_t(r0 + r) * w_stride + size_t(j)]);
#pragma GCC unroll 4
      for (int c = 0; c < NC; ++c) a[r][c] = _mm512_fmadd_ps(wr, x[c], a[r][c]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < NC; ++c) {
      const __mmask16 m = c == NC - 1 ? tail : __mmask16(0xFFFF);
      _mm512_mask_storeu_ps(acc + size_t(r0 + r) * acc_stride + size_t(i0 + 16 * c), m, a[r][c]);
    }
}

template <int NR>
void rows_block(const float* v, int n_keys, int hdv, const float* w, size_t w_stride, float* acc, size_t acc_stride,
                int r0) {
  for (int i0 = 0; i0 < hdv; i0 += 64) {
    const int left = std::min(64, hdv - i0);
    const int nc = (left + 15) / 16;
    const __mmask16 tail = left % 16 ? __mmask16((1u << (left % 16)) - 1) : __mmask16(0xFFFF);
    switch (nc) {
      case 1: block<NR, 1>(v, n_keys, hdv, w, w_stride, acc, acc_stride, r0, i0, tail); break;
      case 2: block<NR, 2>(v, n_keys, hdv, w, w_stride, acc, acc_stride, r0, i0, tail); break;
      case 3: block<NR, 3>(v, n_keys, hdv, w, w_stride, acc, acc_stride, r0, i0, tail); break;
      default: block<NR, 4>(v, n_keys, hdv, w, w_stride, acc, acc_stride, r0, i0, tail); break;
    }
  }
}

void accumulate_tile(const float* v, int n_keys, int hdv, const float* w, size_t w_stride, int n_rows, float* acc,
                     size_t acc_stride) {
  int r0 = 0;
  for (; r0 + 4 <= n_rows; r0 += 4) rows_block<4>(v, n_keys, hdv, w, w_stride, acc, acc_stride, r0);
  switch (n_rows - r0) {
    case 1: rows_block<1>(v, n_keys, hdv, w, w_stride, acc, acc_stride, r0); break;
    case 2: rows_block<2>(v, n_keys, hdv, w, w_stride, acc, acc_stride, r0); break;
    case 3: rows_block<3>(v, n_keys, hdv, w, w_stride, acc, acc_stride, r0); break;
    default: break;
  }
}

// Sums of 16 vectors x[0..15] as one vector: lane m = horizontal sum of x[m].
__m512 reduce16(const __m512* x) {
  __m512 y[8], z[4];
  for (int p = 0; p < 8; ++p)  // per 128-bit lane: [a0+a2, b0+b2, a1+a3, b1+b3]
    y[p] = _mm512_add_ps(_mm512_unpacklo_ps(x[2 * p], x[2 * p + 1]), _mm512_unpackhi_ps(x[2 * p], x[2 * p + 1]));
  for (int q = 0; q < 4; ++q) {  // per 128-bit lane: lane sums of x[4q .. 4q+3]
    const __m512d c = _mm512_castps_pd(y[2 * q]), d = _mm512_castps_pd(y[2 * q + 1]);
    z[q] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(c, d)), _mm512_castpd_ps(_mm512_unpackhi_pd(c, d)));
  }
  // Add the four 128-bit lanes: 128-bit lane q of the result holds the totals of x[4q .. 4q+3].
  const __m512 v0 = _mm512_add_ps(_mm512_shuffle_f32x4(z[0], z[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                  _mm512_shuffle_f32x4(z[0], z[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512 v1 = _mm512_add_ps(_mm512_shuffle_f32x4(z[2], z[3], _MM_SHUFFLE(2, 0, 2, 0)),
                                  _mm512_shuffle_f32x4(z[2], z[3], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(v0, v1, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(v0, v1, _MM_SHUFFLE(3, 1, 3, 1)));
}

// S for rows [r0, r0 + NR) x keys [j0, j0 + NJ), NR, NJ <= 4. Accumulator 4r + j holds the pair
// (r0 + r, j0 + j) alone and reduce16 sums each lane with the same tree, so a score is bit-identical
// whatever block shape computed it: rows and keys at the edges of a tile get exactly the arithmetic
// of the full 4 x 4 blocks (no padding row or key ever touches a real one).
template <int NR, int NJ>
void score_block(const float* k, int hd, const float* const* q, int r0, int j0, float* S, size_t s_stride) {
  __m512 a[16];
#pragma GCC unroll 16
  for (int m = 0; m < 16; ++m) a[m] = _mm512_setzero_ps();
  for (int i = 0; i < hd; i += 16) {
    const __mmask16 m = hd - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (hd - i)) - 1);
    __m512 kv[NJ];
#pragma GCC unroll 4
    for (int j = 0; j < NJ; ++j) kv[j] = _mm512_maskz_loadu_ps(m, k + size_t(j0 + j) * size_t(hd) + i);
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) {
      const __m512 qv = _mm512_maskz_loadu_ps(m, q[r0 + r] + i);
#pragma GCC unroll 4
      for (int j = 0; j < NJ; ++j) a[4 * r + j] = _mm512_fmadd_ps(qv, kv[j], a[4 * r + j]);
    }
  }
  const __m512 sums = reduce16(a);  // lane 4r + j: row r0 + r, key j0 + j
  alignas(64) float out[16];
  _mm512_store_ps(out, sums);
  for (int r = 0; r < NR; ++r) std::memcpy(S + size_t(r0 + r) * s_stride + size_t(j0), out + 4 * r, NJ * sizeof(float));
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
  for (; r0 + 4 <= n_rows; r0 += 4) score_rows<4>(k, n_keys, hd, q_rows, r0, S, s_stride);
  switch (n_rows - r0) {
    case 1: score_rows<1>(k, n_keys, hd, q_rows, r0, S, s_stride); break;
    case 2: score_rows<2>(k, n_keys, hd, q_rows, r0, S, s_stride); break;
    case 3: score_rows<3>(k, n_keys, hd, q_rows, r0, S, s_stride); break;
    default: break;
  }
}

}  // namespace

ScoreTileFn score_tile_avx512() { return cpu_features().has_avx512_set() ? score_tile : nullptr; }

AccumulateTileFn accumulate_tile_avx512() { return cpu_features().has_avx512_set() ? accumulate_tile : nullptr; }

}  // namespace polykv
