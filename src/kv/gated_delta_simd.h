// The body of gated_delta_kernels.h's SIMD token step, over a vector type V (gated_delta_kernels_avx2.cpp,
// gated_delta_kernels_avx512.cpp include it, each compiled for its ISA with contraction off).
//
// V: core/simd_f32_x86.h's F32x8 or F32x16 (T, kWidth, zero, set1, load, store, mul, add).
// Columns are taken in blocks of 4 vectors (then single vectors, then single floats), and for each block the
// rows i = 0 .. d-1 in order, so that the accumulators (tmp, o) stay in registers and every element's chain is
// token_step_ref's: s = s0 * decay; tmp += k_i * s;  u = beta * (v - tmp);  s += k_i * u; o += q_i * s.
#pragma once
#include <cstddef>

namespace polykv::gdn::simd {

// Pass 1 over columns [j, j + N*W): S = decay * S0, tmp = S^T k (N vectors at a time).
template <class V, int N>
inline void decay_and_project(const float* S0, float* S, const float* k, float decay, int d, int j, float* tmp) {
  using T = typename V::T;
  T acc[N];
  for (int n = 0; n < N; ++n) acc[n] = V::zero();
  const T dv = V::set1(decay);
  for (int i = 0; i < d; ++i) {
    const T ki = V::set1(k[i]);
    const float* s0 = S0 + size_t(i) * d + j;
    float* s = S + size_t(i) * d + j;
    for (int n = 0; n < N; ++n) {
      const T x = V::mul(V::load(s0 + n * V::kWidth), dv);
      V::store(s + n * V::kWidth, x);
      acc[n] = V::add(acc[n], V::mul(ki, x));
    }
  }
  for (int n = 0; n < N; ++n) V::store(tmp + j + n * V::kWidth, acc[n]);
}

// Pass 2 over columns [j, j + N*W): S += k u^T with u = tmp (already beta * (v - S^T k)); o = S^T q if q.
template <class V, int N>
inline void update_and_read(float* S, const float* k, const float* q, int d, int j, const float* u, float* o) {
  using T = typename V::T;
  T uu[N], acc[N];
  for (int n = 0; n < N; ++n) uu[n] = V::load(u + j + n * V::kWidth), acc[n] = V::zero();
  for (int i = 0; i < d; ++i) {
    const T ki = V::set1(k[i]);
    float* s = S + size_t(i) * d + j;
    if (q) {
      const T qi = V::set1(q[i]);
      for (int n = 0; n < N; ++n) {
        const T x = V::add(V::load(s + n * V::kWidth), V::mul(ki, uu[n]));
        V::store(s + n * V::kWidth, x);
        acc[n] = V::add(acc[n], V::mul(qi, x));
      }
    } else {
      for (int n = 0; n < N; ++n) V::store(s + n * V::kWidth, V::add(V::load(s + n * V::kWidth), V::mul(ki, uu[n])));
    }
  }
  if (q)
    for (int n = 0; n < N; ++n) V::store(o + j + n * V::kWidth, acc[n]);
}

// Columns [j0, d) one float at a time (the tail after the vectors), token_step_ref's code restricted to them.
inline void tail_pass1(const float* S0, float* S, const float* k, float decay, int d, int j0, float* tmp) {
  for (int j = j0; j < d; ++j) tmp[j] = 0.0f;
  for (int i = 0; i < d; ++i) {
    const float ki = k[i];
    for (int j = j0; j < d; ++j) {
      const float x = S0[size_t(i) * d + j] * decay;
      S[size_t(i) * d + j] = x;
      tmp[j] += ki * x;
    }
  }
}
inline void tail_pass2(float* S, const float* k, const float* q, int d, int j0, const float* u, float* o) {
  if (q)
    for (int j = j0; j < d; ++j) o[j] = 0.0f;
  for (int i = 0; i < d; ++i) {
    const float ki = k[i];
    for (int j = j0; j < d; ++j) {
      float& s = S[size_t(i) * d + j];
      s += ki * u[j];
      if (q) o[j] += q[i] * s;
    }
  }
}

template <class V>
void token_step(const float* S0, float* S, const float* k, const float* v, const float* q, float decay, float beta,
                int d, float* tmp, float* o) {
  constexpr int W = V::kWidth;
  int j = 0;
  for (; j + 4 * W <= d; j += 4 * W) decay_and_project<V, 4>(S0, S, k, decay, d, j, tmp);
  for (; j + W <= d; j += W) decay_and_project<V, 1>(S0, S, k, decay, d, j, tmp);
  tail_pass1(S0, S, k, decay, d, j, tmp);
  for (int x = 0; x < d; ++x) tmp[x] = beta * (v[x] - tmp[x]);  // u
  j = 0;
  for (; j + 4 * W <= d; j += 4 * W) update_and_read<V, 4>(S, k, q, d, j, tmp, o);
  for (; j + W <= d; j += W) update_and_read<V, 1>(S, k, q, d, j, tmp, o);
  tail_pass2(S, k, q, d, j, tmp, o);
}

}  // namespace polykv::gdn::simd
