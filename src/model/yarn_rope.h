// YaRN RoPE (context extension by frequency interpolation) as transformers computes it:
//   low/high = d·ln(L0 / (beta · 2π)) / (2 ln θ) for beta_fast / beta_slow (L0 = the original context),
//   floored / ceiled when `truncate` (transformers' default; gpt-oss sets truncate false), clamped to [0, d − 1];
//   ramp_i = clip((i − low) / (high − low), 0, 1); inv_freq_i = θ^(−2i/d) · (ramp_i / factor + 1 − ramp_i);
//   cos and sin carry mscale = 0.1·ln(factor) + 1, i.e. q·k carries mscale².
// Read from GGUF (rope.scaling.type = yarn, rope.scaling.factor, rope.scaling.original_context_length,
// rope.scaling.yarn_beta_fast / _slow) by config_from_gguf, or set by --rope-scaling yarn (RopeOverride).
#pragma once
#include <vector>

namespace polykv {

struct YarnRope {
  float factor = 0;  // <= 1: no YaRN
  float orig_ctx = 4096;
  float beta_fast = 32, beta_slow = 1;
  bool truncate = true;  // round the correction range outward (transformers' default)
  // The divisors of the plain inv_freq (inv_freq_i /= divisor_i), [n_rot / 2].
  std::vector<float> freq_divisors(float theta, int n_rot) const;
  float mscale() const;
};

}  // namespace polykv
