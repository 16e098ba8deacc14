#include "kv/gated_delta_kernels.h"

#include "core/isa.h"
#include "kv/gated_delta_math.h"

namespace polykv::gdn {

void token_step_fast(const float* S0, float* S, const float* k, const float* v, const float* q, float decay,
                     float beta, int d, float* tmp, float* o) {
  const Isa isa = active_isa();
  TokenStepFn fn = nullptr;
  if (isa_has_avx512(isa)) fn = token_step_avx512_kernel();
  if (!fn && isa_has_avx2(isa)) fn = token_step_avx2_kernel();
#if defined(__aarch64__)
  if (isa == Isa::Neon) fn = token_step_neon_kernel();
#endif
  if (!fn) fn = &token_step_ref;
  fn(S0, S, k, v, q, decay, beta, d, tmp, o);
}

}  // namespace polykv::gdn
