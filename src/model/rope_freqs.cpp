#include "model/rope_freqs.h"

#include <cmath>
#include <numbers>

#include "core/error.h"

namespace polykv {

std::vector<float> llama3_rope_freqs(const Llama3RopeScaling& s, double rope_theta, int head_dim) {
  check(head_dim > 0 && head_dim % 2 == 0, "llama3 rope: head_dim must be even, got ", head_dim);
  check(s.factor > 0 && s.high_freq_factor > s.low_freq_factor, "llama3 rope: bad scaling parameters");
  const double low_wavelen = s.original_context / s.low_freq_factor;
  const double high_wavelen = s.original_context / s.high_freq_factor;
  std::vector<float> out(size_t(head_dim / 2));
  for (int i = 0; i < head_dim / 2; ++i) {
    const double theta = std::pow(rope_theta, -2.0 * i / head_dim);
    const double wavelen = 2.0 * std::numbers::pi / theta;
    double f;
    if (wavelen < high_wavelen) {
      f = 1.0;
    } else if (wavelen > low_wavelen) {
      f = s.factor;
    } else {
      const double smooth =
          (s.original_context / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      f = 1.0 / ((1.0 - smooth) / s.factor + smooth);
    }
    out[size_t(i)] = float(f);
  }
  return out;
}

std::vector<float> rope_inv_freq(float base, int n_rot, const std::vector<float>& llama3_factors,
                                 const std::vector<float>& yarn_divisors) {
  std::vector<float> f(size_t(n_rot / 2));
  for (size_t i = 0; i < f.size(); ++i) {
    f[i] = 1.0f / std::pow(base, float(2 * i) / float(n_rot));
    if (!llama3_factors.empty()) f[i] /= llama3_factors[i];
    if (!yarn_divisors.empty()) f[i] /= yarn_divisors[i];
  }
  return f;
}

}  // namespace polykv
