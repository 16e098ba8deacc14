// Element-wise and normalization ops of the decoder, on f32 rows. Scalar code the compiler
// vectorizes; they are a small share of a forward pass next to matmul and attention, but they grow
// with the rows of a step (CpuBackend spreads them over its pool: cpu_backend_rowops.cpp).
#pragma once
#include <cstdint>

#include "core/layer_kinds.h"

namespace polykv {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i], for each of n_rows rows of n values. out may alias x.
void rmsnorm(const float* x, const float* w, float* out, int n_rows, int n, float eps);

// Rotates the first n_rot dims of each of n_heads heads (head size head_dim) of one token at `pos`.
// inv_freq: [n_rot / 2], the angle of pair i is (pos / scale) * inv_freq[i]. The cos / sin of each
// angle are computed once per call and shared by the heads (rope_angles, then rope_apply).
void rope(float* x, int n_heads, int head_dim, int n_rot, int pos, const float* inv_freq, float scale,
          RopeStyle style);
// cs[2i] = cos, cs[2i + 1] = sin of pair i's angle at `pos`; cs: [n_rot].
void rope_angles(int pos, int n_rot, const float* inv_freq, float scale, float* cs);
// The rotation of rope() with the angles of rope_angles().
void rope_apply(float* x, int n_heads, int head_dim, int n_rot, const float* cs, RopeStyle style);

// gate[i] = act(gate[i]) * up[i] over n values (SwiGLU / GeGLU).
void gated_activation(float* gate, const float* up, int64_t n, Activation act);

// x[i] = cap * tanh(x[i] / cap).
void softcap(float* x, int64_t n, float cap);

// x[i] += y[i].
void add_inplace(float* x, const float* y, int64_t n);

}  // namespace polykv
