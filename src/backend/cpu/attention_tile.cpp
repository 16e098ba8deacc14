#include "backend/cpu/attention_tile.h"

#include <algorithm>
#include <cmath>

#include "backend/cpu/kv_row_ops.h"
#include "core/isa.h"

namespace polykv {
namespace {

// softmax_tile with the weights' exponentials and sum by exp_sum (kv_row_ops.h).
template <ExpSumFn (*kExpSum)()>
void softmax_tile_with(float* S, int n_rows, const int* a, const int* e, float scale, float softcap, float* m,
                       float* l, float* acc, int hdv) {
  static const ExpSumFn exp_sum = kExpSum();
  for (int r = 0; r < n_rows; ++r) {
    float* s = S + size_t(r) * kSoftmaxKeys;
    if (a[r] > e[r]) {
      std::fill(s, s + kSoftmaxKeys, 0.0f);
      continue;
    }
    std::fill(s, s + a[r], -INFINITY);
    std::fill(s + e[r] + 1, s + kSoftmaxKeys, -INFINITY);
    float mx = -INFINITY;
    for (int j = a[r]; j <= e[r]; ++j) {
      float x = s[j] * scale;
      if (softcap > 0) x = softcap * std::tanh(x / softcap);
      s[j] = x;
      mx = std::max(mx, x);
    }
    const float m_new = std::max(m[r], mx);
    const float corr = std::exp(m[r] - m_new);
    if (corr != 1.0f) {
      l[r] *= corr;
      float* ar = acc + size_t(r) * size_t(hdv);
      for (int i = 0; i < hdv; ++i) ar[i] *= corr;
    }
    l[r] += exp_sum(s, kSoftmaxKeys, m_new);  // exp(-inf) = 0 for masked keys
    m[r] = m_new;
  }
}

ExpSumFn scalar_exp_sum() { return exp_sum_scalar; }

}  // namespace

void softmax_tile_scalar(float* S, int n_rows, const int* a, const int* e, float scale, float softcap, float* m,
                         float* l, float* acc, int hdv) {
  softmax_tile_with<scalar_exp_sum>(S, n_rows, a, e, scale, softcap, m, l, acc, hdv);
}

SoftmaxTileFn softmax_tile_avx2() { return exp_sum_avx2() ? softmax_tile_with<exp_sum_avx2> : nullptr; }

#if defined(__aarch64__)
SoftmaxTileFn softmax_tile_neon() { return softmax_tile_with<exp_sum_neon>; }
#endif

SoftmaxTileFn softmax_tile_kernel() {
  const Isa isa = active_isa();
#if defined(__aarch64__)
  if (isa == Isa::Neon) return softmax_tile_neon();
#endif
  if (isa_has_avx512(isa))
    if (const SoftmaxTileFn f = softmax_tile_avx512()) return f;
  if (isa_has_avx2(isa))
    if (const SoftmaxTileFn f = softmax_tile_avx2()) return f;
  return softmax_tile_scalar;
}

void accumulate_tile_scalar(const float* v, int n_keys, int hdv, const float* w, size_t w_stride, int n_rows,
                            float* acc, size_t acc_stride) {
  for (int r = 0; r < n_rows; ++r) {
    float* a = acc + size_t(r) * acc_stride;
    for (int j = 0; j < n_keys; ++j) {
      const float wj = w[size_t(r) * w_stride + size_t(j)];
      const float* vj = v + size_t(j) * size_t(hdv);
      for (int i = 0; i < hdv; ++i) a[i] += wj * vj[i];
    }
  }
}

void score_tile_scalar(const float* k, int n_keys, int hd, const float* const* q_rows, int n_rows, float* S,
                       size_t s_stride) {
  for (int r = 0; r < n_rows; ++r)
    for (int j = 0; j < n_keys; ++j) {
      const float* kj = k + size_t(j) * size_t(hd);
      float s = 0;
      for (int i = 0; i < hd; ++i) s += q_rows[r][i] * kj[i];
      S[size_t(r) * s_stride + size_t(j)] = s;
    }
}

ScoreTileFn score_tile_kernel() {
  const Isa isa = active_isa();
#if defined(__aarch64__)
  if (isa == Isa::Neon) return score_tile_neon();
#endif
  if (isa_has_avx512(isa))
    if (const ScoreTileFn f = score_tile_avx512()) return f;
  if (isa_has_avx2(isa))
    if (const ScoreTileFn f = score_tile_avx2()) return f;
  return score_tile_scalar;
}

AccumulateTileFn accumulate_tile_kernel() {
  const Isa isa = active_isa();
#if defined(__aarch64__)
  if (isa == Isa::Neon) return accumulate_tile_neon();
#endif
  if (isa_has_avx512(isa))
    if (const AccumulateTileFn f = accumulate_tile_avx512()) return f;
  if (isa_has_avx2(isa))
    if (const AccumulateTileFn f = accumulate_tile_avx2()) return f;
  return accumulate_tile_scalar;
}

}  // namespace polykv
