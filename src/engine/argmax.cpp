#include "engine/argmax.h"

#include "core/argmax_ref.h"
#include "core/isa.h"

namespace polykv {

int32_t argmax_first_scalar(const float* x, int32_t n) { return argmax_first_ref(x, n); }

int32_t argmax_first(const float* x, int32_t n) {
  const Isa isa = active_isa();
  if (isa_has_avx512(isa))
    if (const ArgmaxFn f = argmax_avx512()) return f(x, n);
  if (isa_has_avx2(isa))
    if (const ArgmaxFn f = argmax_avx2()) return f(x, n);
  return argmax_first_scalar(x, n);
}

}  // namespace polykv
