// The two products of attention over one tile of keys, on rows decoded to f32 in their type's basis.
//
// Scores: S[r * s_stride + j] = q_r · k[j * hd ..]   for r < n_rows, j < n_keys (q_r = q_rows[r],
// prepared in K's basis). The AVX-512 kernel computes blocks of 4 rows x 4 keys in 16 zmm
// accumulators and reduces the 16 sums with one transpose-and-add tree.
//
// Values:
//   acc[r][i] += sum_j w[r * w_stride + j] * v[j * hdv + i]     for r < n_rows, j < n_keys, i < hdv
// (v: the tile's V rows decoded to f32 in V's basis, [n_keys][hdv]; w: softmax weights; acc rows
// acc_stride floats apart). The AVX2 kernels (attention_tile_avx2.cpp) use 2 x 4 score and
// 4 rows x 16 values blocks. The AVX-512 kernel keeps blocks of 4 rows x 64 values of acc in registers
// across the whole tile, so acc is loaded and stored once per tile instead of once per key.
//
// Invariance (attention's results must not depend on how rows are batched): every kernel here
// computes S[r][j] from q_r and key j alone, and acc row r from w row r, v and acc row r alone, with
// the same operations in the same order whatever n_rows, the position of r among the rows, or the
// other rows' values; S[r][j] also does not depend on n_keys. Tests check it bit for bit.
#pragma once
#include <cstddef>

namespace polykv {

using ScoreTileFn = void (*)(const float* k, int n_keys, int hd, const float* const* q_rows, int n_rows, float* S,
                            size_t s_stride);

void score_tile_scalar(const float* k, int n_keys, int hd, const float* const* q_rows, int n_rows, float* S,
                       size_t s_stride);
ScoreTileFn score_tile_avx2();    // nullptr if this CPU lacks AVX2/FMA/F16C
ScoreTileFn score_tile_avx512();  // nullptr if this CPU lacks AVX-512
#if defined(__aarch64__)
ScoreTileFn score_tile_neon();    // ARM64 NEON (attention_tile_neon.cpp)
#endif
ScoreTileFn score_tile_kernel();  // the active ISA's (core/isa.h), at each call

using AccumulateTileFn = void (*)(const float* v, int n_keys, int hdv, const float* w, size_t w_stride, int n_rows,
                                  float* acc, size_t acc_stride);

void accumulate_tile_scalar(const float* v, int n_keys, int hdv, const float* w, size_t w_stride, int n_rows,
                            float* acc, size_t acc_stride);
AccumulateTileFn accumulate_tile_avx2();    // nullptr if this CPU lacks AVX2/FMA/F16C
AccumulateTileFn accumulate_tile_avx512();  // nullptr if this CPU lacks AVX-512
#if defined(__aarch64__)
AccumulateTileFn accumulate_tile_neon();    // ARM64 NEON (attention_tile_neon.cpp)
#endif
AccumulateTileFn accumulate_tile_kernel();  // the active ISA's (core/isa.h), at each call

// Online-softmax update of rows r < n_rows by their raw scores of one tile of kSoftmaxKeys keys:
//   s = S + r * kSoftmaxKeys; keys j outside [a[r], e[r]] are masked (a[r] > e[r]: none visible);
//   x_j = s_j * scale, then softcap * tanh(x_j / softcap) when softcap > 0;
//   m_new = max(m[r], max_j x_j), corr = exp(m[r] - m_new) (0 when m[r] = -inf);
//   l[r] = l[r] * corr + sum_j exp(x_j - m_new); acc row r (acc + r * hdv) *= corr; m[r] = m_new;
//   s_j <- exp(x_j - m_new), 0 where masked (the weights accumulate_tile takes).
// A row that sees none of the keys keeps m, l, acc and gets weights 0.
inline constexpr int kSoftmaxKeys = 32;
using SoftmaxTileFn = void (*)(float* S, int n_rows, const int* a, const int* e, float scale, float softcap, float* m,
                               float* l, float* acc, int hdv);

void softmax_tile_scalar(float* S, int n_rows, const int* a, const int* e, float scale, float softcap, float* m,
                         float* l, float* acc, int hdv);
SoftmaxTileFn softmax_tile_avx2();    // the scalar structure with AVX2 exp sums; nullptr without AVX2
SoftmaxTileFn softmax_tile_avx512();  // nullptr if this CPU lacks AVX-512
#if defined(__aarch64__)
SoftmaxTileFn softmax_tile_neon();    // the scalar structure with NEON exp sums
#endif
SoftmaxTileFn softmax_tile_kernel();  // the active ISA's (core/isa.h), at each call

}  // namespace polykv
