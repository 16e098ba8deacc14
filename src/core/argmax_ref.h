// The reference greedy argmax of a row: the index of the first maximum in id order; NaN and -inf never
// win (a row of only NaN / -inf, or n <= 0, gives -1); +inf wins like any maximum. engine/argmax.h's
// kernels and every backend's argmax_rows (backend/backend.h) return exactly this.
#pragma once
#include <cstdint>

namespace polykv {

inline int32_t argmax_first_ref(const float* x, int64_t n) {
  int32_t best = -1;
  float best_v = -__builtin_inff();
  for (int64_t i = 0; i < n; ++i)
    if (x[i] > best_v) {  // false for NaN and for -inf
      best_v = x[i];
      best = int32_t(i);
    }
  return best;
}

}  // namespace polykv
