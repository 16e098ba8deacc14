// The per-element math of backend/cuda/ops_cuda.cu, written once for the host and the device so
// that tests/cuda_ops_host_test.cpp (g++, no GPU) checks it against backend/cpu/ops.cpp.
//
// Each function is the work of one GPU thread (or of one step of a thread's loop), with the CPU's
// formula and operation order. Products, sums and quotients go through mul_rn/add_rn/div_rn so that
// nvcc cannot contract them into FMAs (the CPU build has none: -ffp-contract=off under -std=c++20):
// with the accurate (non --use_fast_math) sqrt, division and the same double accumulation, rmsnorm,
// add, add_bias and gather_rows give the CPU's bits; rope, SiLU, GELU and softcap differ from the CPU
// only by CUDA's sinf/cosf/expf/tanhf (at most 2 ulp each, CUDA programming guide, "Mathematical
// functions"), not by their arithmetic around them.
//
// Included by .cu files (nvcc) and by host tests (g++): CUDA-only keywords sit behind POLYKV_HD.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/layer_kinds.h"

#if defined(__CUDACC__)
#define POLYKV_HD __host__ __device__ __forceinline__
#else
#define POLYKV_HD inline
#endif

namespace polykv::cuda::math {

// IEEE round-to-nearest operations that are never fused into an FMA.
POLYKV_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
POLYKV_HD float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
POLYKV_HD float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
POLYKV_HD float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
POLYKV_HD float sqrt_rn(float a) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}
POLYKV_HD double dmul_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
POLYKV_HD double dadd_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}

// ---- rmsnorm: one thread block of kRmsThreads threads per row ---------------------------------
// Thread t sums x[i]^2 over i = t, t + kRmsThreads, ... in double (each square is exact in double,
// as on the CPU); the kRmsThreads partials are then added by rms_tree_step in a fixed tree, so the
// result depends only on the row (never on the number of rows or the grid).
inline constexpr int kRmsThreads = 256;

POLYKV_HD double rms_partial(const float* xr, int cols, int t) {
  double s = 0;
  for (int i = t; i < cols; i += kRmsThreads) s = dadd_rn(s, dmul_rn(double(xr[i]), double(xr[i])));
  return s;
}

// One level of the tree over partials[kRmsThreads]: thread t < stride adds partials[t + stride].
// Strides kRmsThreads/2, ..., 1; partials[0] is then the row's sum of squares.
POLYKV_HD void rms_tree_step(double* partials, int t, int stride) {
  if (t < stride) partials[t] = dadd_rn(partials[t], partials[t + stride]);
}

// 1 / sqrt(mean(x^2) + eps), as backend/cpu/ops.cpp: float(ss / n) + eps in float.
POLYKV_HD float rms_inv(double sum_sq, int cols, float eps) {
  return div_rn(1.0f, sqrt_rn(add_rn(float(sum_sq / double(cols)), eps)));
}

POLYKV_HD float rms_out(float x, float inv, float w) { return mul_rn(mul_rn(x, inv), w); }

// ---- RoPE: one thread per (row, head, pair) ---------------------------------------------------
// Pair i < n_rot / 2 of a head rotates dims (a, b): Norm (2i, 2i+1), Neox (i, i + n_rot/2); dims
// >= n_rot are left alone. The angle is (pos / scale) * inv_freq[i].
POLYKV_HD void rope_dims(int i, int n_rot, RopeStyle style, int& a, int& b) {
  const int half = n_rot / 2;
  a = style == RopeStyle::Norm ? 2 * i : i;
  b = style == RopeStyle::Norm ? 2 * i + 1 : i + half;
}

POLYKV_HD float rope_angle(int pos, float scale, float inv_freq) { return mul_rn(div_rn(float(pos), scale), inv_freq); }

// Rotates (x[a], x[b]) of one head by angle (cos c, sin s).
POLYKV_HD void rope_rotate(float* head, int a, int b, float c, float s) {
  const float x0 = head[a], x1 = head[b];
  head[a] = sub_rn(mul_rn(x0, c), mul_rn(x1, s));
  head[b] = add_rn(mul_rn(x0, s), mul_rn(x1, c));
}

// The work of flat index idx in [0, rows * n_heads * (n_rot / 2)): pair idx % half of head
// (idx / half) % n_heads of row idx / (half * n_heads), at position pos[row].
// x: [rows][n_heads][head_dim]; pos: [rows]; inv_freq: [n_rot / 2].
POLYKV_HD void rope_pair(float* x, int64_t idx, int n_heads, int head_dim, int n_rot, const int32_t* pos,
                         const float* inv_freq, float scale, RopeStyle style) {
  const int half = n_rot / 2;
  const int i = int(idx % half);
  const int64_t rh = idx / half;  // row * n_heads + head
  const int64_t row = rh / n_heads;
  const float angle = rope_angle(pos[row], scale, inv_freq[i]);
  int a = 0, b = 0;
  rope_dims(i, n_rot, style, a, b);
  rope_rotate(x + rh * head_dim, a, b, cosf(angle), sinf(angle));
}

// ---- activations ------------------------------------------------------------------------------
// SiLU(g) * u = g / (1 + exp(-g)) * u.
POLYKV_HD float silu_gate(float g, float u) { return mul_rn(div_rn(g, add_rn(1.0f, expf(-g))), u); }

// GELU (tanh approximation)(g) * u = 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))) * u.
POLYKV_HD float gelu_tanh_gate(float g, float u) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  const float g3 = mul_rn(mul_rn(mul_rn(0.044715f, g), g), g);
  const float t = tanhf(mul_rn(kSqrt2OverPi, add_rn(g, g3)));
  return mul_rn(mul_rn(mul_rn(0.5f, g), add_rn(1.0f, t)), u);
}

POLYKV_HD float gated(float g, float u, Activation act) {
  return act == Activation::SiLU ? silu_gate(g, u) : gelu_tanh_gate(g, u);
}

// cap * tanh(x / cap).
POLYKV_HD float softcap1(float x, float cap) { return mul_rn(cap, tanhf(div_rn(x, cap))); }

}  // namespace polykv::cuda::math
