// ARM64 NEON kernels of attention_tile.h (the score and value tiles; softmax_tile_neon is in
// attention_tile.cpp). 32 vector registers bound the blocks:
//   values: NR <= 4 rows x NC <= 4 vectors of 4 values of acc in registers while the tile's keys
//           stream by (16 accumulators, NC loads of v and NR broadcasts of w per key);
//   scores: NR <= 2 rows x NJ <= 4 keys, one 4-lane accumulator per (row, key) pair (8).
// Values past the last multiple of 4 (hdv % 4) and dims past the last multiple of 4 (hd % 4) go
// through scalar code, the same for every block.
// Invariance (attention_tile.h): acc element (r, i) is one FMA chain over the keys in order, whatever
// the block; score (r, j) is one accumulator reduced by one fixed tree plus the same scalar tail,
// whatever NR, NJ and n_keys.
#include <arm_neon.h>

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "backend/cpu/attention_tile.h"

namespace polykv {
namespace {

// Values: rows [r0, r0 + NR), values [i0, i0 + 4 * NC).
template <int NR, int NC>
void value_block(const float* v, int n_keys, int hdv, const float* w, size_t w_stride, float* acc, size_t acc_stride,
                 int r0, int i0) {
  float32x4_t a[NR][NC];
  for (int r = 0; r < NR; ++r)
    for (int c = 0; c < NC; ++c) a[r][c] = vld1q_f32(acc + size_t(r0 + r) * acc_stride + size_t(i0 + 4 * c));
  for (int j = 0; j < n_keys; ++j) {
    const float* vj = v + size_t(j) * size_t(hdv) + i0;
    float32x4_t x[NC];
    for (int c = 0; c < NC; ++c) x[c] = vld1q_f32(vj + 4 * c);
    for (int r = 0; r < NR; ++r) {
      const float wr = w[size_t(r0 + r) * w_stride + size_t(j)];
      for (int c = 0; c < NC; ++c) a[r][c] = vfmaq_n_f32(a[r][c], x[c], wr);
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int c = 0; c < NC; ++c) vst1q_f32(acc + size_t(r0 + r) * acc_stride + size_t(i0 + 4 * c), a[r][c]);
}

template <int NR>
void value_rows(const float* v, int n_keys, int hdv, const float* w, size_t w_stride, float* acc, size_t acc_stride,
                int r0) {
  const int vec = hdv / 4 * 4;
  int i0 = 0;
  for (; i0 + 16 <= vec; i0 += 16) value_block<NR, 4>(v, n_keys, hdv, w, w_stride, acc, acc_stride, r0, i0);
  switch ((vec - i0) / 4) {
    case 3: value_block<NR, 3>(v, n_keys, hdv, w, w_stride, acc, acc_stride, r0, i0); break;
    case 2: value_block<NR, 2>(v, n_keys, hdv, w, w_stride, acc, acc_stride, r0, i0); break;
    case 1: value_block<NR, 1>(v, n_keys, hdv, w, w_stride, acc, acc_stride, r0, i0); break;
    default: break;
  }
  for (int r = r0; r < r0 + NR; ++r)  // hdv % 4 tail: one FMA chain per element, keys in order
    for (int i = vec; i < hdv; ++i) {
      float s = acc[size_t(r) * acc_stride + size_t(i)];
      for (int j = 0; j < n_keys; ++j) s = std::fma(w[size_t(r) * w_stride + size_t(j)], v[size_t(j) * size_t(hdv) + i], s);
      acc[size_t(r) * acc_stride + size_t(i)] = s;
    }
}

void accumulate_tile_neon(const float* v, int n_keys, int hdv, const float* w, size_t w_stride, int n_rows, float* acc,
                          size_t acc_stride) {
  int r = 0;
  for (; r + 4 <= n_rows; r += 4) value_rows<4>(v, n_keys, hdv, w, w_stride, acc, acc_stride, r);
  switch (n_rows - r) {
    case 3: value_rows<3>(v, n_keys, hdv, w, w_stride, acc, acc_stride, r); break;
    case 2: value_rows<2>(v, n_keys, hdv, w, w_stride, acc, acc_stride, r); break;
    case 1: value_rows<1>(v, n_keys, hdv, w, w_stride, acc, acc_stride, r); break;
    default: break;
  }
}

// Scores of rows [r0, r0 + NR) x keys [j0, j0 + NJ).
template <int NR, int NJ>
void score_block(const float* k, int hd, const float* const* q_rows, float* S, size_t s_stride, int r0, int j0) {
  const int vec = hd / 4 * 4;
  float32x4_t a[NR][NJ];
  for (int r = 0; r < NR; ++r)
    for (int j = 0; j < NJ; ++j) a[r][j] = vdupq_n_f32(0);
  for (int i = 0; i < vec; i += 4) {
    float32x4_t kv[NJ];
    for (int j = 0; j < NJ; ++j) kv[j] = vld1q_f32(k + size_t(j0 + j) * size_t(hd) + i);
    for (int r = 0; r < NR; ++r) {
      const float32x4_t q = vld1q_f32(q_rows[r0 + r] + i);
      for (int j = 0; j < NJ; ++j) a[r][j] = vfmaq_f32(a[r][j], q, kv[j]);
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int j = 0; j < NJ; ++j) {
      float s = vaddvq_f32(a[r][j]);
      const float* kj = k + size_t(j0 + j) * size_t(hd);
      for (int i = vec; i < hd; ++i) s += q_rows[r0 + r][i] * kj[i];
      S[size_t(r0 + r) * s_stride + size_t(j0 + j)] = s;
    }
}

template <int NR>
void score_rows(const float* k, int n_keys, int hd, const float* const* q_rows, float* S, size_t s_stride, int r0) {
  int j = 0;
  for (; j + 4 <= n_keys; j += 4) score_block<NR, 4>(k, hd, q_rows, S, s_stride, r0, j);
  switch (n_keys - j) {
    case 3: score_block<NR, 3>(k, hd, q_rows, S, s_stride, r0, j); break;
    case 2: score_block<NR, 2>(k, hd, q_rows, S, s_stride, r0, j); break;
    case 1: score_block<NR, 1>(k, hd, q_rows, S, s_stride, r0, j); break;
    default: break;
  }
}

void score_tile_neon(const float* k, int n_keys, int hd, const float* const* q_rows, int n_rows, float* S,
                     size_t s_stride) {
  int r = 0;
  for (; r + 2 <= n_rows; r += 2) score_rows<2>(k, n_keys, hd, q_rows, S, s_stride, r);
  if (r < n_rows) score_rows<1>(k, n_keys, hd, q_rows, S, s_stride, r);
}

}  // namespace

ScoreTileFn score_tile_neon() { return score_tile_neon; }
AccumulateTileFn accumulate_tile_neon() { return accumulate_tile_neon; }

}  // namespace polykv
