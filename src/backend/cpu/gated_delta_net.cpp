#include "backend/cpu/gated_delta_net.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/isa.h"
#include "kv/gated_delta_kernels.h"
#include "kv/gated_delta_math.h"

namespace polykv {

void ssm_conv_rows(const float* w, int K, int C, const float* state, const float* x, int n, float* out,
                   float* next_state) {
  const int km1 = K - 1;
  // window rows: [K-1 previous inputs ; n new rows], oldest first
  std::vector<float> win(size_t(km1 + n) * size_t(C));
  if (km1 > 0) std::memcpy(win.data(), state, size_t(km1) * size_t(C) * sizeof(float));
  std::memcpy(win.data() + size_t(km1) * size_t(C), x, size_t(n) * size_t(C) * sizeof(float));
  for (int t = 0; t < n; ++t) {
    float* o = out + size_t(t) * size_t(C);
    for (int c = 0; c < C; ++c) {
      float s = 0.0f;
      for (int j = 0; j < K; ++j) s += w[size_t(c) * size_t(K) + size_t(j)] * win[size_t(t + j) * size_t(C) + size_t(c)];
      o[c] = s / (1.0f + std::exp(-s));
    }
  }
  if (km1 > 0) std::memcpy(next_state, win.data() + size_t(n) * size_t(C), size_t(km1) * size_t(C) * sizeof(float));
}

void gdn_prepare(const GdnParams& p, int n, const float* qkv, const float* alpha, const float* beta_logit,
                 const float* dt_bias, const float* a, float* q, float* k, float* v, float* g, float* beta) {
  const int d = p.head_dim, nk = p.n_k_heads, nv = p.n_v_heads;
  const int C = (2 * nk + nv) * d;
  for (int t = 0; t < n; ++t) {
    const float* row = qkv + size_t(t) * size_t(C);
    for (int h = 0; h < nk; ++h) {
      gdn::l2_normalize(row + h * d, q + (size_t(t) * nk + h) * d, d, p.norm_eps, p.q_scale);
      gdn::l2_normalize(row + (nk + h) * d, k + (size_t(t) * nk + h) * d, d, p.norm_eps, 1.0f);
    }
    std::memcpy(v + size_t(t) * nv * d, row + 2 * nk * d, size_t(nv) * d * sizeof(float));
    for (int j = 0; j < nv; ++j) {
      const size_t i = size_t(t) * nv + j;
      g[i] = gdn::log_decay(alpha[i], dt_bias[j], a[j]);
      beta[i] = gdn::sigmoid(beta_logit[i]);
    }
  }
}

void gdn_rule_tokens(const GdnParams& p, const GdnInputs& in, const float* S0, float* S, float* out, int h0, int h1) {
  const int d = p.head_dim, nk = p.n_k_heads, nv = p.n_v_heads;
  std::vector<float> tmp(static_cast<size_t>(d));
  for (int j = h0; j < h1; ++j) {
    const size_t head = size_t(j) * d * d;
    const int kh = j % nk;
    for (int t = 0; t < in.n; ++t) {
      const size_t gi = size_t(t) * nv + j;
      // The first row reads S0; the others S, in place.
      gdn::token_step_fast(t == 0 ? S0 + head : S + head, S + head, in.k + (size_t(t) * nk + kh) * d,
                           in.v + (size_t(t) * nv + j) * d, in.q + (size_t(t) * nk + kh) * d, std::exp(in.g[gi]),
                           in.beta[gi], d, tmp.data(), out + (size_t(t) * nv + j) * d);
    }
    if (in.n == 0 && S0 != S) std::memcpy(S + head, S0 + head, size_t(d) * d * sizeof(float));
  }
}

void gdn_rule_chunked_fast(const GdnParams& p, const GdnInputs& in, float* S, float* out, int h0, int h1, int chunk) {
  const Isa isa = active_isa();
  GdnChunkedFn fn = nullptr;
  if (isa_has_avx512(isa)) fn = gdn_rule_chunked_avx512();
  if (!fn && isa_has_avx2(isa)) fn = gdn_rule_chunked_avx2();
#if defined(__aarch64__)
  if (isa == Isa::Neon) fn = gdn_rule_chunked_neon();
#endif
  if (!fn) fn = &gdn_rule_chunked;
  fn(p, in, S, out, h0, h1, chunk);
}

}  // namespace polykv
