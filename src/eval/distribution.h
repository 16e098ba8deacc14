// Next-token distributions from logits rows. All logs are natural logs and all sums are in double,
// whatever the logits' precision.
#pragma once
#include <cstdint>
#include <vector>

namespace polykv {

// out[i] = log softmax(logits)[i] = logits[i] - logsumexp(logits), in double.
void log_softmax(const float* logits, int n_vocab, std::vector<double>& out);

// log softmax(logits)[id] alone (one logsumexp pass, no output vector).
double log_prob_of(const float* logits, int n_vocab, int32_t id);

// Index of the highest logit (lowest index on ties, as torch.argmax).
int32_t argmax(const float* logits, int n_vocab);

struct DistributionDiff {
  double kl_nats = 0;     // KL(ref || test) = sum_i p_ref(i) * (log p_ref(i) - log p_test(i))
  double total_variation = 0;  // 0.5 * sum_i |p_ref(i) - p_test(i)|, in [0, 1]
};

// Compares two distributions given as log-probabilities of the same length.
DistributionDiff compare_distributions(const std::vector<double>& ref_logp, const std::vector<double>& test_logp);

}  // namespace polykv
