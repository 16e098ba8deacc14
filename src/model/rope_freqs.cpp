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

}  // namespace polykv
