#include "backend/cpu/attention_tile.h"

namespace polykv {

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
  static const ScoreTileFn best = score_tile_avx512() ? score_tile_avx512() : score_tile_scalar;
  return best;
}

AccumulateTileFn accumulate_tile_kernel() {
  static const AccumulateTileFn best = accumulate_tile_avx512() ? accumulate_tile_avx512() : accumulate_tile_scalar;
  return best;
}

}  // namespace polykv
