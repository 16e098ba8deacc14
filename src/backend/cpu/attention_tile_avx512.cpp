// AVX-512 kernel of attention_tile.h: blocks of NR <= 4 rows x NC <= 4 vectors of 16 values of acc
// live in (up to 16) zmm registers while the tile's keys stream by; per key and block: NC loads of
// v, NR broadcasts of w, NR * NC FMAs. hdv values past the last multiple of 16 use masked loads.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "backend/cpu/attention_tile.h"
#include "backend/cpu/transpose16_avx512.h"
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

// Sums of 16 vectors x[0..15] as one vector: lane m = horizontal sum of x[m], by one fixed tree per
// lane. Only x[0 .. 4 * NR) are read; the others count as zeros and their work is skipped (lane m's
// arithmetic does not depend on the other vectors, so it is the same for every NR).
template <int NR>
[[gnu::always_inline]] inline __m512 reduce16(const __m512* x) {
  __m512 y[8], z[4];  // fully unrolled, so that everything stays in registers
#pragma GCC unroll 8
  for (int p = 0; p < 2 * NR; ++p)  // per 128-bit lane: [a0+a2, b0+b2, a1+a3, b1+b3]
    y[p] = _mm512_add_ps(_mm512_unpacklo_ps(x[2 * p], x[2 * p + 1]), _mm512_unpackhi_ps(x[2 * p], x[2 * p + 1]));
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {  // per 128-bit lane: lane sums of x[4q .. 4q+3]
    if (q >= NR) {
      z[q] = _mm512_setzero_ps();
      continue;
    }
    const __m512d c = _mm512_castps_pd(y[2 * q]), d = _mm512_castps_pd(y[2 * q + 1]);
    z[q] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(c, d)), _mm512_castpd_ps(_mm512_unpackhi_pd(c, d)));
  }
  // Add the four 128-bit lanes: 128-bit lane q of the result holds the totals of x[4q .. 4q+3].
  const __m512 v0 = _mm512_add_ps(_mm512_shuffle_f32x4(z[0], z[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                  _mm512_shuffle_f32x4(z[0], z[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512 v1 = NR <= 2 ? _mm512_setzero_ps()
                            : _mm512_add_ps(_mm512_shuffle_f32x4(z[2], z[3], _MM_SHUFFLE(2, 0, 2, 0)),
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
  const __m512 sums = reduce16<NR>(a);  // lane 4r + j: row r0 + r, key j0 + j
  // Each row's 4 sums straight from its 128-bit lane (a 64-byte store read back in pieces would
  // stall store forwarding).
  const __mmask8 keys = __mmask8((1u << NJ) - 1);
  _mm_mask_storeu_ps(S + size_t(r0) * s_stride + size_t(j0), keys, _mm512_castps512_ps128(sums));
  if constexpr (NR > 1) _mm_mask_storeu_ps(S + size_t(r0 + 1) * s_stride + size_t(j0), keys, _mm512_extractf32x4_ps(sums, 1));
  if constexpr (NR > 2) _mm_mask_storeu_ps(S + size_t(r0 + 2) * s_stride + size_t(j0), keys, _mm512_extractf32x4_ps(sums, 2));
  if constexpr (NR > 3) _mm_mask_storeu_ps(S + size_t(r0 + 3) * s_stride + size_t(j0), keys, _mm512_extractf32x4_ps(sums, 3));
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

// ---- The same scores for many rows, from the transposed tile ----
//
// The reduce form above computes, per (row, key), 16 partial sums p_l (l = lane) as FMA chains over
// i = l, l + 16, ... from 0, then reduce16's tree: total = (s0 + s1) + (s2 + s3) with
// s_L = (p_4L + p_4L+2) + (p_4L+1 + p_4L+3). Its horizontal shuffles cost about as much as the FMAs.
// With the tile transposed once (kt[i][j], 32 keys per dimension), the same chains and the same tree
// run with keys in the lanes and vertical adds only, so the scores are bit-identical; the transpose
// pays for itself from about 8 rows on.

constexpr int kTileKeys = 32;     // the transposed form's tile: exactly 32 keys
constexpr int kMaxKtDim = 256;    // head sizes it handles (stack scratch)

// kt[i * 32 + j] = k[j * hd + i] for the tile's 32 keys; hd a multiple of 16.
void transpose_tile(const float* k, int hd, float* kt) {
  for (int h = 0; h < kTileKeys; h += 16)
    for (int d = 0; d < hd; d += 16) {
      __m512 r[16];
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) r[j] = _mm512_loadu_ps(k + size_t(h + j) * size_t(hd) + size_t(d));
      transpose16(r);
#pragma GCC unroll 16
      for (int e = 0; e < 16; ++e) _mm512_storeu_ps(kt + size_t(d + e) * kTileKeys + size_t(h), r[e]);
    }
}

// Partial sums p_l and p_{l+2} (the chains of lanes l and l + 2) for NR rows and all 32 keys of
// the transposed tile (two vectors of 16 keys), summed: sum[2r + v] = p_l + p_{l+2} of row r, keys
// [16v, 16v + 16). Both key halves in one pass, so that each broadcast of q[r][i] feeds two FMAs and
// each kt load NR: per i, 4 loads and 2 NR broadcasts for 4 NR FMAs (the FMA ports, not the load
// ports, bound it). Each accumulator is one (row, key half, chain): the chains' arithmetic is that
// of the one-half form and of reduce16.
template <int NR>
[[gnu::always_inline]] inline void chain_pair(const float* kt, int hd, const float* const* q, int l, __m512* sum) {
  __m512 a[NR][2], b[NR][2];
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r) a[r][0] = a[r][1] = b[r][0] = b[r][1] = _mm512_setzero_ps();
  for (int i = l; i < hd; i += 16) {
    const float* ra = kt + size_t(i) * kTileKeys;
    const float* rb = kt + size_t(i + 2) * kTileKeys;
    const __m512 ka0 = _mm512_loadu_ps(ra), ka1 = _mm512_loadu_ps(ra + 16);
    const __m512 kb0 = _mm512_loadu_ps(rb), kb1 = _mm512_loadu_ps(rb + 16);
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) {
      const __m512 qa = _mm512_set1_ps(q[r][i]), qb = _mm512_set1_ps(q[r][i + 2]);
      a[r][0] = _mm512_fmadd_ps(qa, ka0, a[r][0]);
      a[r][1] = _mm512_fmadd_ps(qa, ka1, a[r][1]);
      b[r][0] = _mm512_fmadd_ps(qb, kb0, b[r][0]);
      b[r][1] = _mm512_fmadd_ps(qb, kb1, b[r][1]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r) {
    sum[2 * r] = _mm512_add_ps(a[r][0], b[r][0]);
    sum[2 * r + 1] = _mm512_add_ps(a[r][1], b[r][1]);
  }
}

// Scores of NR rows (q[0 .. NR)) against the 32 keys of the transposed tile, into S[r * s_stride ..].
template <int NR>
void score_rows_kt(const float* kt, int hd, const float* const* q, float* S, size_t s_stride) {
  __m512 u[2 * NR], w[2 * NR];
#pragma GCC unroll 4
  for (int L = 0; L < 4; ++L) {
    __m512 ta[2 * NR], tb[2 * NR];
    chain_pair<NR>(kt, hd, q, 4 * L, ta);      // p_4L + p_4L+2
    chain_pair<NR>(kt, hd, q, 4 * L + 1, tb);  // p_4L+1 + p_4L+3
#pragma GCC unroll 8
    for (int x = 0; x < 2 * NR; ++x) {
      const __m512 sL = _mm512_add_ps(ta[x], tb[x]);
      if (L == 0) u[x] = sL;
      if (L == 1) u[x] = _mm512_add_ps(u[x], sL);  // s0 + s1
      if (L == 2) w[x] = sL;
      if (L == 3) w[x] = _mm512_add_ps(w[x], sL);  // s2 + s3
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r) {
    _mm512_storeu_ps(S + size_t(r) * s_stride, _mm512_add_ps(u[2 * r], w[2 * r]));
    _mm512_storeu_ps(S + size_t(r) * s_stride + 16, _mm512_add_ps(u[2 * r + 1], w[2 * r + 1]));
  }
}

void score_tile_kt(const float* k, int hd, const float* const* q_rows, int n_rows, float* S, size_t s_stride) {
  alignas(64) float kt[kMaxKtDim * kTileKeys];  // [hd][32]
  transpose_tile(k, hd, kt);
  int r0 = 0;
  for (; r0 + 4 <= n_rows; r0 += 4) score_rows_kt<4>(kt, hd, q_rows + r0, S + size_t(r0) * s_stride, s_stride);
  switch (n_rows - r0) {
    case 1: score_rows_kt<1>(kt, hd, q_rows + r0, S + size_t(r0) * s_stride, s_stride); break;
    case 2: score_rows_kt<2>(kt, hd, q_rows + r0, S + size_t(r0) * s_stride, s_stride); break;
    case 3: score_rows_kt<3>(kt, hd, q_rows + r0, S + size_t(r0) * s_stride, s_stride); break;
    default: break;
  }
}

// Either form gives the same bits; the transposed one where it is faster.
void score_tile(const float* k, int n_keys, int hd, const float* const* q_rows, int n_rows, float* S,
                size_t s_stride) {
  if (n_keys == kTileKeys && n_rows > 8 && hd % 16 == 0 && hd <= kMaxKtDim) {
    score_tile_kt(k, hd, q_rows, n_rows, S, s_stride);
    return;
  }
  int r0 = 0;
  for (; r0 + 4 <= n_rows; r0 += 4) score_rows<4>(k, n_keys, hd, q_rows, r0, S, s_stride);
  switch (n_rows - r0) {
    case 1: score_rows<1>(k, n_keys, hd, q_rows, r0, S, s_stride); break;
    case 2: score_rows<2>(k, n_keys, hd, q_rows, r0, S, s_stride); break;
    case 3: score_rows<3>(k, n_keys, hd, q_rows, r0, S, s_stride); break;
    default: break;
  }
}

// exp(x) for x <= 0 (x = s - max): 2^k * p(r), k = round(x / ln 2), r = x - k ln 2 in [-ln2/2, ln2/2],
// p the degree-6 Taylor polynomial (relative error < 2e-7). x < -87 (and -inf) gives 0.
__m512 exp_nonpositive(__m512 x) {
  const __mmask16 underflow = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_LT_OQ);
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
  const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693145752f), x);  // ln 2 split in two for accuracy
  r = _mm512_fnmadd_ps(k, _mm512_set1_ps(1.42860677e-6f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512i e = _mm512_slli_epi32(_mm512_cvtps_epi32(k), 23);  // 2^k via the exponent field
  return _mm512_maskz_mov_ps(__mmask16(~underflow), _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(p), e)));
}

// Lane m = max over the lanes of x[m], for m < 4 * G (one fixed tree per lane, like reduce16; the
// other vectors are not read).
template <int G>
[[gnu::always_inline]] inline __m512 max16(const __m512* x) {
  __m512 y[8], z[4];
#pragma GCC unroll 8
  for (int p = 0; p < 2 * G; ++p)
    y[p] = _mm512_max_ps(_mm512_unpacklo_ps(x[2 * p], x[2 * p + 1]), _mm512_unpackhi_ps(x[2 * p], x[2 * p + 1]));
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    if (q >= G) {
      z[q] = _mm512_set1_ps(-INFINITY);
      continue;
    }
    const __m512d c = _mm512_castps_pd(y[2 * q]), d = _mm512_castps_pd(y[2 * q + 1]);
    z[q] = _mm512_max_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(c, d)), _mm512_castpd_ps(_mm512_unpackhi_pd(c, d)));
  }
  const __m512 v0 = _mm512_max_ps(_mm512_shuffle_f32x4(z[0], z[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                  _mm512_shuffle_f32x4(z[0], z[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512 v1 = _mm512_max_ps(_mm512_shuffle_f32x4(z[2], z[3], _MM_SHUFFLE(2, 0, 2, 0)),
                                  _mm512_shuffle_f32x4(z[2], z[3], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_max_ps(_mm512_shuffle_f32x4(v0, v1, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(v0, v1, _MM_SHUFFLE(3, 1, 3, 1)));
}

// attention_tile.h's softmax_tile for up to 4 * G rows (n of them) at once: each row's 32 scores in
// two vectors; the rows' maxima and sums come out of one transposing tree each (lane r: row r), so
// m, l and the corrections are updated 16 rows per vector. Row r's arithmetic depends on row r alone.
template <int G>
void softmax_rows(float* S, int n, const int* a, const int* e, float scale, float softcap, float* m, float* l,
                  float* acc, int hdv) {
  static_assert(kSoftmaxKeys == 32);
  const __m512 neg_inf = _mm512_set1_ps(-INFINITY);
  __m512 part[16];        // per row: lane-wise max, then lane-wise sum of its two vectors
  __mmask16 seen = 0;     // rows that see a key of the tile
  for (int r = 0; r < 4 * G; ++r) {
    part[r] = neg_inf;
    if (r >= n) continue;
    float* s = S + size_t(r) * kSoftmaxKeys;
    if (a[r] > e[r]) continue;
    seen |= __mmask16(1u << r);
    const int w = e[r] - a[r] + 1;
    const uint32_t visible = (w == 32 ? ~0u : ((1u << w) - 1)) << a[r];
    __m512 x0, x1;
    if (softcap > 0) {
      for (int j = a[r]; j <= e[r]; ++j) s[j] = softcap * std::tanh(s[j] * scale / softcap);
      x0 = _mm512_loadu_ps(s);
      x1 = _mm512_loadu_ps(s + 16);
    } else {
      x0 = _mm512_mul_ps(_mm512_loadu_ps(s), _mm512_set1_ps(scale));
      x1 = _mm512_mul_ps(_mm512_loadu_ps(s + 16), _mm512_set1_ps(scale));
    }
    x0 = _mm512_mask_blend_ps(__mmask16(visible), neg_inf, x0);
    x1 = _mm512_mask_blend_ps(__mmask16(visible >> 16), neg_inf, x1);
    _mm512_storeu_ps(s, x0);
    _mm512_storeu_ps(s + 16, x1);
    part[r] = _mm512_max_ps(x0, x1);
  }
  const __mmask16 rows = __mmask16((1u << n) - 1);
  const __m512 m_old = _mm512_maskz_loadu_ps(rows, m);
  // Rows that see nothing keep m and get corr 1; m_old = -inf gives corr exp(-inf) = 0.
  const __m512 m_new = _mm512_mask_max_ps(m_old, seen, m_old, max16<G>(part));
  const __m512 corr = _mm512_mask_mov_ps(_mm512_set1_ps(1.0f), seen, exp_nonpositive(_mm512_sub_ps(m_old, m_new)));
  alignas(64) float mn[16], cr[16];
  _mm512_store_ps(mn, m_new);
  _mm512_store_ps(cr, corr);
  for (int r = 0; r < 4 * G; ++r) {
    part[r] = _mm512_setzero_ps();
    if (!(seen >> r & 1)) {
      if (r < n) {
        _mm512_storeu_ps(S + size_t(r) * kSoftmaxKeys, _mm512_setzero_ps());
        _mm512_storeu_ps(S + size_t(r) * kSoftmaxKeys + 16, _mm512_setzero_ps());
      }
      continue;
    }
    float* s = S + size_t(r) * kSoftmaxKeys;
    const __m512 mv = _mm512_set1_ps(mn[r]);
    const __m512 w0 = exp_nonpositive(_mm512_sub_ps(_mm512_loadu_ps(s), mv));
    const __m512 w1 = exp_nonpositive(_mm512_sub_ps(_mm512_loadu_ps(s + 16), mv));
    _mm512_storeu_ps(s, w0);
    _mm512_storeu_ps(s + 16, w1);
    part[r] = _mm512_add_ps(w0, w1);
    if (cr[r] != 1.0f) {
      float* ar = acc + size_t(r) * size_t(hdv);
      const __m512 c = _mm512_set1_ps(cr[r]);
      for (int i = 0; i < hdv; i += 16) {
        const __mmask16 t = hdv - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (hdv - i)) - 1);
        _mm512_mask_storeu_ps(ar + i, t, _mm512_mul_ps(_mm512_maskz_loadu_ps(t, ar + i), c));
      }
    }
  }
  // l = l * corr + the row's sum (rows that see nothing: l * 1 + 0).
  const __m512 l_new = _mm512_add_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(rows, l), corr), reduce16<G>(part));
  _mm512_mask_storeu_ps(m, rows, m_new);
  _mm512_mask_storeu_ps(l, rows, l_new);
}

void softmax_tile(float* S, int n_rows, const int* a, const int* e, float scale, float softcap, float* m, float* l,
                  float* acc, int hdv) {
  for (int r0 = 0; r0 < n_rows; r0 += 16) {
    const int n = std::min(16, n_rows - r0);
    float* Sr = S + size_t(r0) * kSoftmaxKeys;
    float* ar = acc + size_t(r0) * size_t(hdv);
    switch ((n + 3) / 4) {
      case 1: softmax_rows<1>(Sr, n, a + r0, e + r0, scale, softcap, m + r0, l + r0, ar, hdv); break;
      case 2: softmax_rows<2>(Sr, n, a + r0, e + r0, scale, softcap, m + r0, l + r0, ar, hdv); break;
      case 3: softmax_rows<3>(Sr, n, a + r0, e + r0, scale, softcap, m + r0, l + r0, ar, hdv); break;
      default: softmax_rows<4>(Sr, n, a + r0, e + r0, scale, softcap, m + r0, l + r0, ar, hdv); break;
    }
  }
}

}  // namespace

SoftmaxTileFn softmax_tile_avx512() { return cpu_features().has_avx512_set() ? softmax_tile : nullptr; }

ScoreTileFn score_tile_avx512() { return cpu_features().has_avx512_set() ? score_tile : nullptr; }

AccumulateTileFn accumulate_tile_avx512() { return cpu_features().has_avx512_set() ? accumulate_tile : nullptr; }

}  // namespace polykv
