// Per-channel equalization of K before it is quantized (InnerQ-style), with one scale vector per
// layer and KV head (the published forks use one global vector).
//
//   stored k' = k / s,   query q' = q * s   =>   q'·k' = q·k exactly (up to rounding)
//
// so loud K channels are shrunk before quantization and the inverse is folded into the query. Scales
// are calibrated once per layer from the first chunk of K rows stored (the prompt), post-RoPE, and are
// then fixed: every stored row of a layer uses the same scales. RoPE rotates channel pairs, so the two
// channels of a pair share one scale (a rotation keeps a pair's magnitude, not its channels').
//   m_c = RMS over calibration tokens of the pair magnitude of channel c
//   s_c = clamp((m_c / geomean(m))^alpha, 1/max_ratio, max_ratio)
// Whether it helps depends on the model (when the query's loud channels line up with K's, q * s grows
// and so does the error it sees): it is measured, see docs/QUALITY.md.
#pragma once
#include <cstddef>
#include <vector>

#include "core/layer_kinds.h"

namespace polykv {

struct KEqualizationParams {
  float alpha = 0.0f;       // 0: off; 0.5: square-root scales; 1: full
  float max_ratio = 8.0f;   // scales are clamped to [1/max_ratio, max_ratio]
  int min_tokens = 16;      // a layer whose first chunk is shorter stays unscaled (scales 1)
};

class KEqualizer {
 public:
  KEqualizer() = default;
  KEqualizer(const KEqualizationParams& p, int n_layer, int n_head_kv, int head_dim, int n_rot, RopeStyle style);

  bool enabled() const { return params_.alpha > 0; }
  const KEqualizationParams& params() const { return params_; }

  // k: [n][n_head_kv][head_dim] post-RoPE K rows about to be stored for layer `layer` at positions
  // starting at pos. At pos 0 the layer is calibrated from them (once); then k is divided by s in place.
  void equalize_keys(int layer, int pos, float* k, int n);
  // q: [n][n_head][head_dim]; query head h uses the scales of KV head h / (n_head / n_head_kv).
  void scale_queries(int layer, float* q, int n, int n_head) const;

  // [n_head_kv][head_dim] scales of a layer (all 1 until calibrated).
  const std::vector<float>& scales(int layer) const { return scales_[size_t(layer)]; }
  void reset();  // back to uncalibrated (a cache reused for another sequence)

 private:
  int partner(int c) const;  // the channel RoPE pairs with c (c itself if not rotated)

  KEqualizationParams params_;
  int n_head_kv_ = 0, head_dim_ = 0, n_rot_ = 0;
  RopeStyle style_ = RopeStyle::Norm;
  std::vector<std::vector<float>> scales_;  // [n_layer][n_head_kv * head_dim]
  std::vector<bool> calibrated_;            // [n_layer]
};

}  // namespace polykv
