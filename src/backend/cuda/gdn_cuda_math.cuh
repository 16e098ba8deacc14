// Per-element math of the CUDA Gated DeltaNet kernels (gdn_cuda.cu), written once for nvcc (device
// code) and g++ (host code: tests/gdn_cuda_math_test.cpp checks it against the CPU reference of
// kv/gated_delta_math.h and backend/cpu/gated_delta_net.cpp in CI, where there is no GPU).
//
// Every accumulation is an explicit fused multiply-add (device __fmaf_rn, host std::fmaf: both
// correctly rounded), so the device's forward step and its rollback replay (the same column_step on
// the same inputs) produce the same bits, and the host twin computes what the device computes.
#pragma once
#include <cmath>

#ifdef __CUDACC__
#define POLYKV_GDN_HD __host__ __device__ __forceinline__
#define POLYKV_GDN_UNROLL _Pragma("unroll")
#else
#define POLYKV_GDN_HD inline
#define POLYKV_GDN_UNROLL
#endif

namespace polykv::cuda::gdn {

// Largest convolution kernel the CUDA kernels take (Qwen3.5: 4).
constexpr int kMaxConvKernel = 8;

POLYKV_GDN_HD float fma(float a, float b, float c) {
#ifdef __CUDA_ARCH__
  return __fmaf_rn(a, b, c);
#else
  return std::fmaf(a, b, c);
#endif
}

POLYKV_GDN_HD float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// Log-space decay g = softplus(alpha + dt_bias) * a (a < 0), as kv/gated_delta_math.h.
POLYKV_GDN_HD float log_decay(float alpha, float dt_bias, float a) {
  const float x = alpha + dt_bias;
  const float sp = x > 20.0f ? x : log1pf(expf(x));
  return sp * a;
}

// One output of the causal depthwise convolution + SiLU: win[0..K) the inputs oldest first (the last is
// the current row's), w[0..K) the channel's taps.
POLYKV_GDN_HD float conv_silu(const float* w, const float* win, int K) {
  float s = 0.0f;
  for (int j = 0; j < K; ++j) s = fma(w[j], win[j], s);
  return s / (1.0f + expf(-s));
}

// The l2 normalisation's factor: x * factor = scale * x / sqrt(sum x^2 + eps).
POLYKV_GDN_HD float l2_factor(float sum_sq, float eps, float scale) { return scale / sqrtf(sum_sq + eps); }

// A column of a state held with a stride (the state in global memory: S[i][j] at p[i * stride]).
struct StridedColumn {
  float* p;
  int stride;
  POLYKV_GDN_HD float& operator[](int i) const { return p[i * stride]; }
};

// One token of the delta rule for column j of one value head's state S [d][d] (row i = key dimension):
//   S <- decay S;  u_j = beta (v_j - sum_i k_i S[i][j]);  S[i][j] += k_i u_j;  o_j = sum_i q_i S[i][j]
// The CPU's token_step (kv/gated_delta_math.h) in the same order per column, with fused multiply-adds.
// A thread may own a piece of the column (rows [i0, i0 + r)): it runs decay_dot on its piece, the
// pieces' sums are added (piece 0's + piece 1's), then update_dot; column_step is the one-piece case.
// R > 0: the piece's length known at compile time (s in registers); R == 0: r_run at run time.

// s[i] *= decay for the piece; returns sum_i k[i] s[i] in i order (k: the piece's keys).
template <int R, class Col>
POLYKV_GDN_HD float decay_dot(Col& s, const float* k, float decay, int r_run) {
  const int r = R > 0 ? R : r_run;
  float t = 0.0f;
  POLYKV_GDN_UNROLL
  for (int i = 0; i < r; ++i) {
    const float si = s[i] * decay;
    s[i] = si;
    t = fma(k[i], si, t);
  }
  return t;
}

// s[i] += k[i] u for the piece; with q, returns sum_i q[i] s[i] in i order (else 0).
template <int R, class Col>
POLYKV_GDN_HD float update_dot(Col& s, const float* k, const float* q, float u, int r_run) {
  const int r = R > 0 ? R : r_run;
  float o = 0.0f;
  if (q) {
    POLYKV_GDN_UNROLL
    for (int i = 0; i < r; ++i) {
      const float si = fma(k[i], u, s[i]);
      s[i] = si;
      o = fma(q[i], si, o);
    }
  } else {
    POLYKV_GDN_UNROLL
    for (int i = 0; i < r; ++i) s[i] = fma(k[i], u, s[i]);
  }
  return o;
}

POLYKV_GDN_HD float delta_u(float beta, float v, float t) { return beta * (v - t); }

// The whole column in one piece (D > 0: d == D at compile time).
template <int D, class Col>
POLYKV_GDN_HD float column_step(Col& s, const float* k, const float* q, float v, float decay, float beta, int d_run) {
  const float t = decay_dot<D>(s, k, decay, d_run);
  return update_dot<D>(s, k, q, delta_u(beta, v, t), d_run);
}

}  // namespace polykv::cuda::gdn
