// YarnRope (model/yarn_rope.h): transformers' YaRN frequencies and attention factor.
#include <algorithm>
#include <cmath>

#include "model/yarn_rope.h"

namespace polykv {

std::vector<float> YarnRope::freq_divisors(float theta, int n_rot) const {
  const double d = n_rot, pi = 3.14159265358979323846;
  auto corr_dim = [&](double beta) { return d * std::log(orig_ctx / (beta * 2 * pi)) / (2 * std::log(double(theta))); };
  double low = corr_dim(beta_fast), high = corr_dim(beta_slow);
  if (truncate) low = std::floor(low), high = std::ceil(high);
  low = std::max(0.0, low), high = std::min(d - 1, high);
  if (low == high) high += 0.001;
  std::vector<float> out(size_t(n_rot / 2));
  for (int i = 0; i < n_rot / 2; ++i) {
    const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    out[size_t(i)] = float(1.0 / (ramp / factor + 1.0 - ramp));
  }
  return out;
}

float YarnRope::mscale() const { return factor <= 1 ? 1.0f : float(0.1 * std::log(double(factor)) + 1.0); }

}  // namespace polykv
