#include "backend/cpu/gated_delta_net.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

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

namespace {

float dot(const float* a, const float* b, int d) {
  float s = 0.0f;
  for (int i = 0; i < d; ++i) s += a[i] * b[i];
  return s;
}

// y[j] += c * x[j]
void axpy(float c, const float* x, float* y, int d) {
  for (int i = 0; i < d; ++i) y[i] += c * x[i];
}

}  // namespace

void gdn_rule_chunked(const GdnParams& p, const GdnInputs& in, float* S, float* out, int h0, int h1, int chunk) {
  const int d = p.head_dim, nk = p.n_k_heads, nv = p.n_v_heads;
  const int L = std::max(1, chunk);
  const size_t Ls = static_cast<size_t>(L), ds = static_cast<size_t>(d);
  std::vector<float> G(Ls), U(Ls * ds), KK(Ls * Ls), QK(Ls * Ls), Sq(ds);
  for (int j = h0; j < h1; ++j) {
    float* Sj = S + size_t(j) * d * d;
    const int kh = j % nk;
    auto krow = [&](int t) { return in.k + (size_t(t) * nk + kh) * d; };
    auto qrow = [&](int t) { return in.q + (size_t(t) * nk + kh) * d; };
    for (int c0 = 0; c0 < in.n; c0 += L) {
      const int n = std::min(L, in.n - c0);
      float acc = 0.0f;
      for (int t = 0; t < n; ++t) G[size_t(t)] = acc += in.g[size_t(c0 + t) * nv + j];
      // Gram matrices of the chunk (s <= t)
      for (int t = 0; t < n; ++t)
        for (int s = 0; s <= t; ++s) {
          KK[size_t(t) * L + s] = dot(krow(c0 + t), krow(c0 + s), d);
          QK[size_t(t) * L + s] = dot(qrow(c0 + t), krow(c0 + s), d);
        }
      // U_t = beta_t (v_t - e^{G_t} S0^T k_t) - sum_{s<t} beta_t e^{G_t - G_s} KK_ts U_s
      for (int t = 0; t < n; ++t) {
        float* u = U.data() + size_t(t) * d;
        const float* k = krow(c0 + t);
        std::fill(u, u + d, 0.0f);
        for (int i = 0; i < d; ++i) axpy(k[i], Sj + size_t(i) * d, u, d);  // u = S0^T k
        const float b = in.beta[size_t(c0 + t) * nv + j], eg = std::exp(G[size_t(t)]);
        const float* v = in.v + (size_t(c0 + t) * nv + j) * d;
        for (int x = 0; x < d; ++x) u[x] = b * (v[x] - eg * u[x]);
        for (int s = 0; s < t; ++s)
          axpy(-b * std::exp(G[size_t(t)] - G[size_t(s)]) * KK[size_t(t) * L + s], U.data() + size_t(s) * d, u, d);
      }
      // o_t = e^{G_t} S0^T q_t + sum_{s<=t} e^{G_t - G_s} QK_ts U_s
      for (int t = 0; t < n; ++t) {
        float* o = out + (size_t(c0 + t) * nv + j) * d;
        const float* q = qrow(c0 + t);
        std::fill(Sq.begin(), Sq.end(), 0.0f);
        for (int i = 0; i < d; ++i) axpy(q[i], Sj + size_t(i) * d, Sq.data(), d);
        const float eg = std::exp(G[size_t(t)]);
        for (int x = 0; x < d; ++x) o[x] = eg * Sq[size_t(x)];
        for (int s = 0; s <= t; ++s)
          axpy(std::exp(G[size_t(t)] - G[size_t(s)]) * QK[size_t(t) * L + s], U.data() + size_t(s) * d, o, d);
      }
      // S = e^{G_last} S0 + sum_s e^{G_last - G_s} k_s U_s^T
      const float gl = G[size_t(n - 1)], egl = std::exp(gl);
      for (int i = 0; i < d; ++i) {
        float* srow = Sj + size_t(i) * d;
        for (int x = 0; x < d; ++x) srow[x] *= egl;
      }
      for (int s = 0; s < n; ++s) {
        const float* k = krow(c0 + s);
        const float w = std::exp(gl - G[size_t(s)]);
        const float* u = U.data() + size_t(s) * d;
        for (int i = 0; i < d; ++i) axpy(w * k[i], u, Sj + size_t(i) * d, d);
      }
    }
  }
}

}  // namespace polykv
