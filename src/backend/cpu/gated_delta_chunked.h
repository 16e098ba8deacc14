// The chunked Gated DeltaNet recurrence (gated_delta_net.h has the algebra) written once over an
// arithmetic policy: gated_delta_chunked_ref.cpp instantiates it with ScalarChunkOps (gdn_rule_chunked, the
// reference), the *_avx2 / *_avx512 / *_neon TUs with VectorChunkOps<V> (gdn_rule_chunked_fast). The vector policy
// gives the reference's bits: every value is the same chain of IEEE multiplies and adds in the same order,
// only many independent values at a time (contraction is off in those TUs):
//   axpy  y[x] += c * x[x]       the reference's loop, lanes over x;
//   gram  KK[t][s] = k_t . k_s,  QK[t][s] = q_t . k_s  (s <= t), each a sum over i = 0 .. d-1 in order from
//         0.0f: the vector form holds the chunk's keys transposed (KT [d][L]) and runs lanes over s.
// Include only from gated_delta_chunked_ref.cpp and the ISA TUs (all compiled with contraction off).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "backend/cpu/gated_delta_net.h"

namespace polykv::gdn_chunked {
namespace {

// Row pointers of one value head's keys and queries in a prepared input.
struct HeadRows {
  const GdnInputs& in;
  int nk, kh, d;
  const float* k(int t) const { return in.k + (size_t(t) * nk + kh) * d; }
  const float* q(int t) const { return in.q + (size_t(t) * nk + kh) * d; }
};

struct ScalarChunkOps {
  static void axpy(float c, const float* x, float* y, int n) {
    for (int i = 0; i < n; ++i) y[i] += c * x[i];
  }
  static float dot(const float* a, const float* b, int d) {
    float s = 0.0f;
    for (int i = 0; i < d; ++i) s += a[i] * b[i];
    return s;
  }
  // Rows c0 .. c0+n-1 of the chunk; KK, QK [L][L] (row t, column s <= t). kt: unused scratch.
  static void gram(const HeadRows& h, int c0, int n, int L, float* KK, float* QK, std::vector<float>& kt) {
    for (int t = 0; t < n; ++t)
      for (int s = 0; s <= t; ++s) {
        KK[size_t(t) * L + s] = dot(h.k(c0 + t), h.k(c0 + s), h.d);
        QK[size_t(t) * L + s] = dot(h.q(c0 + t), h.k(c0 + s), h.d);
      }
  }
};

template <class V>
struct VectorChunkOps {
  using T = typename V::T;
  static constexpr int W = V::kWidth;
  static void axpy(float c, const float* x, float* y, int n) {
    const T cv = V::set1(c);
    int i = 0;
    for (; i + 2 * W <= n; i += 2 * W) {
      V::store(y + i, V::add(V::load(y + i), V::mul(cv, V::load(x + i))));
      V::store(y + i + W, V::add(V::load(y + i + W), V::mul(cv, V::load(x + i + W))));
    }
    for (; i + W <= n; i += W) V::store(y + i, V::add(V::load(y + i), V::mul(cv, V::load(x + i))));
    for (; i < n; ++i) y[i] += c * x[i];
  }
  static void gram(const HeadRows& h, int c0, int n, int L, float* KK, float* QK, std::vector<float>& kt) {
    const int d = h.d;
    kt.resize(size_t(d) * L);
    for (int s = 0; s < n; ++s) {  // KT[i][s] = k_s[i]
      const float* k = h.k(c0 + s);
      for (int i = 0; i < d; ++i) kt[size_t(i) * L + s] = k[i];
    }
    for (int t = 0; t < n; ++t) {
      const float* kt_row = h.k(c0 + t);
      const float* qt_row = h.q(c0 + t);
      float* kk = KK + size_t(t) * L;
      float* qk = QK + size_t(t) * L;
      int s0 = 0;
      for (; s0 + 4 * W <= t + 1; s0 += 4 * W) block<4>(kt, L, d, s0, kt_row, qt_row, kk, qk);
      for (; s0 + W <= t + 1; s0 += W) block<1>(kt, L, d, s0, kt_row, qt_row, kk, qk);
      for (int s = s0; s <= t; ++s) {  // the tail, one column at a time in the same order
        float a = 0.0f, b = 0.0f;
        for (int i = 0; i < d; ++i) {
          const float ks = kt[size_t(i) * L + s];
          a += kt_row[i] * ks;
          b += qt_row[i] * ks;
        }
        kk[s] = a;
        qk[s] = b;
      }
    }
  }
  // Columns s0 .. s0 + N*W - 1 of row t of KK and QK.
  template <int N>
  static void block(const std::vector<float>& kt, int L, int d, int s0, const float* k, const float* q, float* kk,
                    float* qk) {
    T a[N], b[N];
    for (int m = 0; m < N; ++m) a[m] = V::zero(), b[m] = V::zero();
    for (int i = 0; i < d; ++i) {
      const T ki = V::set1(k[i]), qi = V::set1(q[i]);
      const float* row = kt.data() + size_t(i) * L + s0;
      for (int m = 0; m < N; ++m) {
        const T ks = V::load(row + m * W);
        a[m] = V::add(a[m], V::mul(ki, ks));
        b[m] = V::add(b[m], V::mul(qi, ks));
      }
    }
    for (int m = 0; m < N; ++m) V::store(kk + s0 + m * W, a[m]), V::store(qk + s0 + m * W, b[m]);
  }
};

// gdn_rule_chunked's body (gated_delta_net.h): value heads [h0, h1), S in place, chunks of `chunk` rows.
template <class Ops>
void rule_chunked(const GdnParams& p, const GdnInputs& in, float* S, float* out, int h0, int h1, int chunk) {
  const int d = p.head_dim, nk = p.n_k_heads, nv = p.n_v_heads;
  const int L = std::max(1, chunk);
  const size_t Ls = static_cast<size_t>(L), ds = static_cast<size_t>(d);
  std::vector<float> G(Ls), U(Ls * ds), KK(Ls * Ls), QK(Ls * Ls), Sq(ds), kt;
  for (int j = h0; j < h1; ++j) {
    float* Sj = S + size_t(j) * d * d;
    const HeadRows h{in, nk, j % nk, d};
    for (int c0 = 0; c0 < in.n; c0 += L) {
      const int n = std::min(L, in.n - c0);
      float acc = 0.0f;
      for (int t = 0; t < n; ++t) G[size_t(t)] = acc += in.g[size_t(c0 + t) * nv + j];
      Ops::gram(h, c0, n, L, KK.data(), QK.data(), kt);  // Gram matrices of the chunk (s <= t)
      // U_t = beta_t (v_t - e^{G_t} S0^T k_t) - sum_{s<t} beta_t e^{G_t - G_s} KK_ts U_s
      for (int t = 0; t < n; ++t) {
        float* u = U.data() + size_t(t) * d;
        const float* k = h.k(c0 + t);
        std::fill(u, u + d, 0.0f);
        for (int i = 0; i < d; ++i) Ops::axpy(k[i], Sj + size_t(i) * d, u, d);  // u = S0^T k
        const float b = in.beta[size_t(c0 + t) * nv + j], eg = std::exp(G[size_t(t)]);
        const float* v = in.v + (size_t(c0 + t) * nv + j) * d;
        for (int x = 0; x < d; ++x) u[x] = b * (v[x] - eg * u[x]);
        for (int s = 0; s < t; ++s)
          Ops::axpy(-b * std::exp(G[size_t(t)] - G[size_t(s)]) * KK[size_t(t) * L + s], U.data() + size_t(s) * d, u, d);
      }
      // o_t = e^{G_t} S0^T q_t + sum_{s<=t} e^{G_t - G_s} QK_ts U_s
      for (int t = 0; t < n; ++t) {
        float* o = out + (size_t(c0 + t) * nv + j) * d;
        const float* q = h.q(c0 + t);
        std::fill(Sq.begin(), Sq.end(), 0.0f);
        for (int i = 0; i < d; ++i) Ops::axpy(q[i], Sj + size_t(i) * d, Sq.data(), d);
        const float eg = std::exp(G[size_t(t)]);
        for (int x = 0; x < d; ++x) o[x] = eg * Sq[size_t(x)];
        for (int s = 0; s <= t; ++s)
          Ops::axpy(std::exp(G[size_t(t)] - G[size_t(s)]) * QK[size_t(t) * L + s], U.data() + size_t(s) * d, o, d);
      }
      // S = e^{G_last} S0 + sum_s e^{G_last - G_s} k_s U_s^T
      const float gl = G[size_t(n - 1)], egl = std::exp(gl);
      for (int i = 0; i < d; ++i) {
        float* srow = Sj + size_t(i) * d;
        for (int x = 0; x < d; ++x) srow[x] *= egl;
      }
      for (int s = 0; s < n; ++s) {
        const float* k = h.k(c0 + s);
        const float w = std::exp(gl - G[size_t(s)]);
        const float* u = U.data() + size_t(s) * d;
        for (int i = 0; i < d; ++i) Ops::axpy(w * k[i], u, Sj + size_t(i) * d, d);
      }
    }
  }
}

}  // namespace
}  // namespace polykv::gdn_chunked
