#include "eval/distribution.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace polykv {
namespace {

double logsumexp(const float* x, int n) {
  double mx = -INFINITY;
  for (int i = 0; i < n; ++i) mx = std::max(mx, double(x[i]));
  check(std::isfinite(mx), "logits have no finite maximum");
  double s = 0;
  for (int i = 0; i < n; ++i) s += std::exp(double(x[i]) - mx);
  return mx + std::log(s);
}

}  // namespace

void log_softmax(const float* logits, int n_vocab, std::vector<double>& out) {
  const double lse = logsumexp(logits, n_vocab);
  out.resize(size_t(n_vocab));
  for (int i = 0; i < n_vocab; ++i) out[size_t(i)] = double(logits[i]) - lse;
}

double log_prob_of(const float* logits, int n_vocab, int32_t id) { return double(logits[id]) - logsumexp(logits, n_vocab); }

int32_t argmax(const float* logits, int n_vocab) {
  return int32_t(std::max_element(logits, logits + n_vocab) - logits);
}

DistributionDiff compare_distributions(const std::vector<double>& ref_logp, const std::vector<double>& test_logp) {
  check(ref_logp.size() == test_logp.size(), "distributions of different sizes");
  DistributionDiff d;
  for (size_t i = 0; i < ref_logp.size(); ++i) {
    const double pr = std::exp(ref_logp[i]), pt = std::exp(test_logp[i]);
    if (pr > 0) d.kl_nats += pr * (ref_logp[i] - test_logp[i]);
    d.total_variation += std::abs(pr - pt);
  }
  d.total_variation *= 0.5;
  d.kl_nats = std::max(0.0, d.kl_nats);  // rounding can leave a tiny negative sum for equal inputs
  return d;
}

}  // namespace polykv
