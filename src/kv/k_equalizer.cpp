#include "kv/k_equalizer.h"

#include <algorithm>
#include <cmath>

namespace polykv {

KEqualizer::KEqualizer(const KEqualizationParams& p, int n_layer, int n_head_kv, int head_dim, int n_rot,
                       RopeStyle style)
    : params_(p), n_head_kv_(n_head_kv), head_dim_(head_dim), n_rot_(n_rot), style_(style) {
  scales_.assign(size_t(n_layer), std::vector<float>(size_t(n_head_kv) * size_t(head_dim), 1.0f));
  calibrated_.assign(size_t(n_layer), false);
}

void KEqualizer::reset() {
  for (auto& s : scales_) std::fill(s.begin(), s.end(), 1.0f);
  std::fill(calibrated_.begin(), calibrated_.end(), false);
}

int KEqualizer::partner(int c) const {
  if (c >= n_rot_) return c;
  if (style_ == RopeStyle::Norm) return c ^ 1;
  const int half = n_rot_ / 2;
  return c < half ? c + half : c - half;
}

void KEqualizer::equalize_keys(int layer, int pos, float* k, int n) {
  if (!enabled()) return;
  std::vector<float>& s = scales_[size_t(layer)];
  if (pos == 0 && !calibrated_[size_t(layer)]) {
    calibrated_[size_t(layer)] = true;
    if (n >= params_.min_tokens) {
      for (int g = 0; g < n_head_kv_; ++g) {
        std::vector<double> ms(static_cast<size_t>(head_dim_), 0.0);  // mean square per channel
        for (int t = 0; t < n; ++t) {
          const float* row = k + (size_t(t) * n_head_kv_ + size_t(g)) * head_dim_;
          for (int c = 0; c < head_dim_; ++c) ms[size_t(c)] += double(row[c]) * row[c];
        }
        std::vector<double> m(static_cast<size_t>(head_dim_));
        double log_sum = 0;
        for (int c = 0; c < head_dim_; ++c) {
          const int p = partner(c);
          // pair magnitude: a rotation moves energy between c and its partner, never out of the pair
          m[size_t(c)] = std::sqrt((ms[size_t(c)] + ms[size_t(p)]) / (p == c ? 1.0 : 2.0) / n) + 1e-12;
          log_sum += std::log(m[size_t(c)]);
        }
        const double geo = std::exp(log_sum / head_dim_);
        const double lo = 1.0 / params_.max_ratio, hi = params_.max_ratio;
        for (int c = 0; c < head_dim_; ++c)
          s[size_t(g) * head_dim_ + size_t(c)] =
              float(std::clamp(std::pow(m[size_t(c)] / geo, double(params_.alpha)), lo, hi));
      }
    }
  }
  const size_t row = size_t(n_head_kv_) * size_t(head_dim_);
  for (int t = 0; t < n; ++t)
    for (size_t i = 0; i < row; ++i) k[size_t(t) * row + i] /= s[i];
}

void KEqualizer::scale_queries(int layer, float* q, int n, int n_head) const {
  if (!enabled()) return;
  const std::vector<float>& s = scales_[size_t(layer)];
  const int group = n_head / n_head_kv_;
  for (int t = 0; t < n; ++t)
    for (int h = 0; h < n_head; ++h) {
      float* qh = q + (size_t(t) * n_head + size_t(h)) * head_dim_;
      const float* sh = s.data() + size_t(h / group) * head_dim_;
      for (int c = 0; c < head_dim_; ++c) qh[c] *= sh[c];
    }
}

}  // namespace polykv
