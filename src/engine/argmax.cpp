#include "engine/argmax.h"

#include "core/isa.h"

namespace polykv {

int32_t argmax_first_scalar(const float* x, int32_t n) {
  int32_t best = -1;
  float best_v = -__builtin_inff();
  for (int32_t i = 0; i < n; ++i)
    if (x[i] > best_v) {  // false for NaN and for -inf
      best_v = x[i];
      best = i;
    }
  return best;
}

int32_t argmax_first(const float* x, int32_t n) {
  const Isa isa = active_isa();
  if (isa_has_avx512(isa))
    if (const ArgmaxFn f = argmax_avx512()) return f(x, n);
  if (isa_has_avx2(isa))
    if (const ArgmaxFn f = argmax_avx2()) return f(x, n);
  return argmax_first_scalar(x, n);
}

}  // namespace polykv
