// The per-token arithmetic of a Gated DeltaNet layer's recurrence, shared by the CPU kernels
// (backend/cpu/gated_delta_net.cpp) and the recurrent state's rollback replay (kv/recurrent_state.cpp),
// so that a replayed state is bit-identical to the one the step computed.
//
// One value head's state S is [d][d] row-major, row i = key dimension i (S maps a key to a value):
//   S <- decay * S;  u = beta * (v - S^T k);  S <- S + k u^T;  o = S^T q
#pragma once
#include <cmath>

namespace polykv::gdn {

// One token for one value head, the reference: reads the state before the token from S0 and writes the
// state after it to S (S0 == S: in place; otherwise the two may not overlap) and, if q != nullptr,
// writes o = S^T q. k, q: [d] (already l2-normalised, q scaled); v, o: [d]; tmp: [d] scratch.
// Every value is a plain IEEE multiply then add (no fused multiply-add), one column j at a time in key
// order i, so that gated_delta_kernels.h's SIMD forms give these bits exactly.
// Defined in gated_delta_ref.cpp, compiled with contraction off on every target (GCC contracts a * b + c
// into an FMA by default on ARM64 even in ISO mode, which would make the reference's bits depend on the target).
void token_step_ref(const float* S0, float* S, const float* k, const float* v, const float* q, float decay, float beta,
                    int d, float* tmp, float* o);

// The reference in place.
inline void token_step(float* S, const float* k, const float* v, const float* q, float decay, float beta, int d,
                       float* tmp, float* o) {
  token_step_ref(S, S, k, v, q, decay, beta, d, tmp, o);
}

// x / sqrt(sum x^2 + eps) of n values, into out (may alias x), times `scale`.
inline void l2_normalize(const float* x, float* out, int n, float eps, float scale) {
  float ss = 0.0f;
  for (int i = 0; i < n; ++i) ss += x[i] * x[i];
  const float f = scale / std::sqrt(ss + eps);
  for (int i = 0; i < n; ++i) out[i] = x[i] * f;
}

// Log-space decay g = softplus(alpha + dt_bias) * a (a = -exp(A_log) < 0) and beta = sigmoid(b).
inline float log_decay(float alpha, float dt_bias, float a) {
  const float x = alpha + dt_bias;
  const float sp = x > 20.0f ? x : std::log1p(std::exp(x));
  return sp * a;
}
inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

}  // namespace polykv::gdn
