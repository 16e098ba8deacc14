// CpuBackend's ops for hybrid models: gated attention's split and gate, and the Gated DeltaNet's
// convolution and delta rule over each step sequence's recurrent state (kv/recurrent_state.h).
#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/gated_delta_net.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kv/recurrent_state.h"

namespace polykv {
namespace {

RecurrentState& state_of(const StepSeq& s) {
  RecurrentState* r = s.kv->recurrent_state();
  check(r != nullptr, "a Gated DeltaNet layer on a sequence without a recurrent state (KV made without the model's "
        "kv_shape()?)");
  check(r->memory().host_accessible(), "the CPU backend cannot run a sequence whose recurrent state is in ",
        r->memory().name(), " memory");
  return *r;
}

}  // namespace

void CpuBackend::deinterleave(const float* src, int rows, int groups, int a, int b, float* dst_a, float* dst_b) {
  for (int64_t r = 0; r < int64_t(rows) * groups; ++r) {
    const float* s = src + r * (a + b);
    std::memcpy(dst_a + r * a, s, size_t(a) * sizeof(float));
    std::memcpy(dst_b + r * b, s + a, size_t(b) * sizeof(float));
  }
}

void CpuBackend::sigmoid_mul(float* x, const float* gate, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= 1.0f / (1.0f + std::exp(-gate[i]));
}

void CpuBackend::ssm_conv(int layer, const float* w, int kernel, const float* x, float* out, int C) {
  for (const StepSeq& s : step_) {
    RecurrentState& r = state_of(s);
    check(r.shape().conv_channels() == C && r.shape().conv_kernel == kernel, "ssm_conv: state shape mismatch");
    const float* xs = x + int64_t(s.row0) * C;
    ssm_conv_rows(w, kernel, C, r.conv(layer), xs, s.n, out + int64_t(s.row0) * C, r.next_conv(layer));
    for (int t = 0; t < s.n; ++t)  // the step log: the convolution's inputs (rollback replays them)
      if (float* lr = r.log_row(layer, t)) std::memcpy(lr, xs + int64_t(t) * C, size_t(C) * sizeof(float));
  }
}

void CpuBackend::gated_delta_rule(int layer, const GdnParams& p, const float* qkv, const float* alpha,
                                  const float* beta_logit, const float* dt_bias, const float* a, float* out) {
  const int d = p.head_dim, nk = p.n_k_heads, nv = p.n_v_heads, C = (2 * nk + nv) * d;
  int rows = 0;
  for (const StepSeq& s : step_) rows += s.n;
  // Prepared inputs of all rows: q, k [rows][nk][d], v [rows][nv][d], g, beta [rows][nv].
  const size_t qk = size_t(rows) * nk * d, vv = size_t(rows) * nv * d, gg = size_t(rows) * nv;
  gdn_scratch_.resize(2 * qk + vv + 2 * gg);
  float *q = gdn_scratch_.data(), *k = q + qk, *v = k + qk, *g = v + vv, *beta = g + gg;
  gdn_prepare(p, rows, qkv, alpha, beta_logit, dt_bias, a, q, k, v, g, beta);

  std::vector<GdnInputs> ins(step_.size());
  for (size_t i = 0; i < step_.size(); ++i) {
    const StepSeq& s = step_[i];
    RecurrentState& r = state_of(s);
    check(r.shape().conv_channels() == C && r.shape().n_v_heads == nv, "gated_delta_rule: state shape mismatch");
    const size_t o = size_t(s.row0);
    ins[i] = {s.n, q + o * nk * d, k + o * nk * d, v + o * nv * d, g + o * nv, beta + o * nv};
    for (int t = 0; t < s.n; ++t) {  // the step log: key, value, decay, beta (after the conv input)
      float* lr = r.log_row(layer, t);
      if (!lr) break;
      float* lk = lr + C;
      std::memcpy(lk, ins[i].k + size_t(t) * nk * d, size_t(nk) * d * sizeof(float));
      std::memcpy(lk + nk * d, ins[i].v + size_t(t) * nv * d, size_t(nv) * d * sizeof(float));
      float* ld = lk + (nk + nv) * d;
      for (int j = 0; j < nv; ++j) {
        ld[j] = std::exp(ins[i].g[size_t(t) * nv + j]);
        ld[nv + j] = ins[i].beta[size_t(t) * nv + j];
      }
    }
  }
  // One work item per (sequence, value head): it reads the head's state at the step's start (ssm) and
  // writes the state after the step (next_ssm, the other slot). Short steps (decode, speculative
  // verification) run token by token, as the rollback replay does, reading ssm directly; longer ones
  // (prompt chunks) copy the head over, then run in chunks in place.
  const int64_t items = int64_t(step_.size()) * nv;
  const size_t head_floats = size_t(d) * d;
  pool_->parallel_for(items, [&](int64_t b, int64_t e) {
    for (int64_t it = b; it < e; ++it) {
      const size_t i = size_t(it / nv);
      const int j = int(it % nv);
      const StepSeq& s = step_[i];
      RecurrentState& r = *s.kv->recurrent_state();
      const float* S0 = r.ssm(layer);
      float* S = r.next_ssm(layer);
      float* o = out + int64_t(s.row0) * nv * d;
      if (s.n <= RecurrentState::kMaxLoggedRows) {
        gdn_rule_tokens(p, ins[i], S0, S, o, j, j + 1);
      } else {
        std::memcpy(S + j * head_floats, S0 + j * head_floats, head_floats * sizeof(float));
        gdn_rule_chunked_fast(p, ins[i], S, o, j, j + 1);
      }
    }
  });
}

}  // namespace polykv
