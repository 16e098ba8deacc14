// gated_delta_math.h's token_step_ref, in a TU of its own with floating-point contraction off, so that its
// multiplies and adds are two roundings each on every target and compiler (gated_delta_kernels.h's SIMD forms,
// also compiled without contraction, promise exactly these bits).
#include "core/fp_contract_off.h"  // first: contraction off for this TU
#include "kv/gated_delta_math.h"

namespace polykv::gdn {

void token_step_ref(const float* S0, float* S, const float* k, const float* v, const float* q, float decay,
                    float beta, int d, float* tmp, float* o) {
  for (int j = 0; j < d; ++j) tmp[j] = 0.0f;
  for (int i = 0; i < d; ++i) {  // S = decay * S0; tmp = S^T k
    const float* s0 = S0 + i * d;
    float* s = S + i * d;
    const float ki = k[i];
    for (int j = 0; j < d; ++j) {
      s[j] = s0[j] * decay;
      tmp[j] += ki * s[j];
    }
  }
  for (int j = 0; j < d; ++j) tmp[j] = beta * (v[j] - tmp[j]);
  if (q) {
    for (int j = 0; j < d; ++j) o[j] = 0.0f;
    for (int i = 0; i < d; ++i) {  // S += k u^T; o = S^T q
      float* s = S + i * d;
      const float ki = k[i], qi = q[i];
      for (int j = 0; j < d; ++j) {
        s[j] += ki * tmp[j];
        o[j] += qi * s[j];
      }
    }
  } else {
    for (int i = 0; i < d; ++i) {
      float* s = S + i * d;
      const float ki = k[i];
      for (int j = 0; j < d; ++j) s[j] += ki * tmp[j];
    }
  }
}

}  // namespace polykv::gdn
