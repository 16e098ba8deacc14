#include "backend/cpu/ops.h"

#include <cmath>
#include <vector>

namespace polykv {

void rmsnorm(const float* x, const float* w, float* out, int n_rows, int n, float eps) {
  for (int r = 0; r < n_rows; ++r) {
    const float* xr = x + int64_t(r) * n;
    float* o = out + int64_t(r) * n;
    double ss = 0;
    for (int i = 0; i < n; ++i) ss += double(xr[i]) * xr[i];
    const float inv = 1.0f / std::sqrt(float(ss / n) + eps);
    for (int i = 0; i < n; ++i) o[i] = xr[i] * inv * w[i];
  }
}

void rope_angles(int pos, int n_rot, const float* inv_freq, float scale, float* cs) {
  const float p = float(pos) / scale;
  for (int i = 0; i < n_rot / 2; ++i) {
    const float angle = p * inv_freq[i];
    cs[2 * i] = std::cos(angle);
    cs[2 * i + 1] = std::sin(angle);
  }
}

void rope_apply(float* x, int n_heads, int head_dim, int n_rot, const float* cs, RopeStyle style) {
  const int half = n_rot / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + int64_t(h) * head_dim;
    for (int i = 0; i < half; ++i) {
      const float c = cs[2 * i], s = cs[2 * i + 1];
      const int a = style == RopeStyle::Norm ? 2 * i : i;
      const int b = style == RopeStyle::Norm ? 2 * i + 1 : i + half;
      const float x0 = v[a], x1 = v[b];
      v[a] = x0 * c - x1 * s;
      v[b] = x0 * s + x1 * c;
    }
  }
}

void rope(float* x, int n_heads, int head_dim, int n_rot, int pos, const float* inv_freq, float scale,
          RopeStyle style) {
  thread_local std::vector<float> cs;  // [n_rot / 2][cos, sin], shared by the heads
  cs.resize(size_t(n_rot));
  rope_angles(pos, n_rot, inv_freq, scale, cs.data());
  rope_apply(x, n_heads, head_dim, n_rot, cs.data(), style);
}

void gated_activation(float* gate, const float* up, int64_t n, Activation act) {
  if (act == Activation::SiLU) {
    for (int64_t i = 0; i < n; ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
  } else {
    constexpr float kSqrt2OverPi = 0.7978845608028654f;
    for (int64_t i = 0; i < n; ++i) {
      const float g = gate[i];
      gate[i] = 0.5f * g * (1.0f + std::tanh(kSqrt2OverPi * (g + 0.044715f * g * g * g))) * up[i];
    }
  }
}

void softcap(float* x, int64_t n, float cap) {
  for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

void add_inplace(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

}  // namespace polykv
