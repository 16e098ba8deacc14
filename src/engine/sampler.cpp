#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "core/error.h"
#include "engine/argmax.h"
#include "engine/step_switch.h"

namespace polykv {
namespace {

// Strict weak order: higher logit first, then lower id, so every sort/partition is deterministic.
struct ByLogitDesc {
  template <typename C>
  bool operator()(const C& a, const C& b) const {
    return a.logit != b.logit ? a.logit > b.logit : a.id < b.id;
  }
};

}  // namespace

void validate(const SamplingParams& p) {
  // Each comparison is written so that NaN fails it.
  check(std::isfinite(p.temperature) && p.temperature >= 0.0f,
        "temperature must be a finite number >= 0 (0: greedy), got ", p.temperature);
  check(p.top_k >= 0, "top_k must be >= 0 (0: off), got ", p.top_k);
  check(p.top_p >= 0.0f && p.top_p <= 1.0f, "top_p must be in [0, 1] (1: off), got ", p.top_p);
  check(p.min_p >= 0.0f && p.min_p <= 1.0f, "min_p must be in [0, 1] (0: off), got ", p.min_p);
  check(std::isfinite(p.repeat_penalty) && p.repeat_penalty > 0.0f,
        "repeat_penalty must be a finite number > 0 (1: off), got ", p.repeat_penalty);
  check(p.repeat_last_n >= -1, "repeat_last_n must be >= -1 (0: off, -1: whole history), got ", p.repeat_last_n);
}

uint64_t random_seed() {
  std::random_device rd;
  const uint64_t r = (uint64_t(rd()) << 32) ^ uint64_t(rd());
  return r & ((uint64_t(1) << 53) - 1);
}

Sampler::Sampler(SamplingParams params) : params_(params), rng_(params.seed) { validate(params_); }

double Sampler::uniform01() { return double(rng_() >> 11) * 0x1.0p-53; }

// Penalizes each distinct token of the window once. Precondition: cands_[id].id == id (id order).
void Sampler::apply_penalty(std::span<const int32_t> history, int32_t n_vocab) {
  const float penalty = params_.repeat_penalty;
  if (penalty == 1.0f || params_.repeat_last_n == 0 || history.empty()) return;
  size_t n = history.size();
  if (params_.repeat_last_n > 0) n = std::min(n, size_t(params_.repeat_last_n));
  window_.assign(history.end() - std::ptrdiff_t(n), history.end());
  std::sort(window_.begin(), window_.end());
  window_.erase(std::unique(window_.begin(), window_.end()), window_.end());
  for (int32_t id : window_) {
    if (id < 0 || id >= n_vocab) continue;
    float& l = cands_[size_t(id)].logit;
    l = l > 0.0f ? l / penalty : l * penalty;
  }
}

bool Sampler::plain_argmax(std::span<const int32_t> history) const {
  const bool penalty = params_.repeat_penalty != 1.0f && params_.repeat_last_n != 0 && !history.empty();
  return params_.temperature <= 0.0f && !penalty;
}

bool Sampler::always_plain_argmax() const {
  return params_.temperature <= 0.0f && (params_.repeat_penalty == 1.0f || params_.repeat_last_n == 0);
}

int32_t Sampler::prepare(const float* logits, int32_t n_vocab, std::span<const int32_t> history, double& total) {
  check(n_vocab > 0, "sampler: n_vocab must be positive, got ", n_vocab);
  constexpr float kInf = std::numeric_limits<float>::infinity();
  inf_ = false;
  total = 0.0;

  // Greedy without a penalty: one pass, no candidate list (a 128k vocabulary's list cost ~0.3 ms a token,
  // which a 64-agent step paid 64 times). The same choice as the general path below: NaN never wins, the
  // first maximum in id order (+inf included) wins, and all-NaN/-inf is the same error.
  if (plain_argmax(history)) {
    // engine/argmax.h: the same contract, vectorized (POLYKV_ENGINE_STEP=old: the scalar loop).
    const int32_t best = engine_step_old() ? argmax_first_scalar(logits, n_vocab) : argmax_first(logits, n_vocab);
    check(best >= 0, "sampler: no finite logit among ", n_vocab, " (all NaN or -inf)");
    return best;
  }

  // Candidates in id order; NaN becomes -inf (never drawn).
  cands_.resize(size_t(n_vocab));
  for (int32_t i = 0; i < n_vocab; ++i) cands_[size_t(i)] = {std::isnan(logits[i]) ? -kInf : logits[i], i};
  // Keeps ±inf as they are; a tiny penalty can overflow a large finite logit to +inf, so +inf is
  // looked for afterwards.
  apply_penalty(history, n_vocab);
  const bool any_pos_inf =
      std::any_of(cands_.begin(), cands_.end(), [](const Candidate& c) { return c.logit == kInf; });
  if (any_pos_inf) {
    // The limit of softmax: uniform over the +inf tokens (id order kept: greedy takes the lowest id).
    std::erase_if(cands_, [](const Candidate& c) { return c.logit != std::numeric_limits<float>::infinity(); });
    if (params_.temperature <= 0.0f) return cands_.front().id;
    inf_ = true;
    return -1;
  }
  std::erase_if(cands_, [](const Candidate& c) { return c.logit == -kInf; });
  check(!cands_.empty(), "sampler: no finite logit among ", n_vocab, " (all NaN or -inf)");

  if (params_.temperature <= 0.0f) {
    // Greedy: first maximum in id order, i.e. the lowest id on ties.
    const Candidate* best = &cands_.front();
    for (const auto& c : cands_)
      if (c.logit > best->logit) best = &c;
    return best->id;
  }

  // top-k: an O(n) selection; only the k survivors are ever sorted.
  const int k = params_.top_k;
  if (k > 0 && size_t(k) < cands_.size()) {
    std::nth_element(cands_.begin(), cands_.begin() + (k - 1), cands_.end(), ByLogitDesc{});
    cands_.resize(size_t(k));
  }

  // Softmax at temperature 1 over the current set: p_i = exp(l_i - m) / z.
  Candidate best = cands_.front();  // the most probable candidate (lowest id on ties)
  for (const auto& c : cands_)
    if (ByLogitDesc{}(c, best)) best = c;
  const double m = double(best.logit);
  double z = 0.0;
  for (const auto& c : cands_) z += std::exp(double(c.logit) - m);

  // min-p before top-p is equivalent to the documented order: both keep a prefix of the descending
  // order, and top-p below uses z of the pre-min-p set, so the kept set is the shorter prefix.
  if (params_.min_p > 0.0f) {
    const double cutoff = std::log(double(params_.min_p));  // p_i >= min_p * p_max  <=>  l_i - m >= log(min_p)
    std::erase_if(cands_, [&](const Candidate& c) { return double(c.logit) - m < cutoff; });
    // The best has l - m == 0 >= cutoff whenever min_p <= 1 (validate()); keep it whatever happens, so
    // the draw below never sees an empty set.
    if (cands_.empty()) cands_.push_back(best);
  }

  if (params_.top_p < 1.0f) {
    std::sort(cands_.begin(), cands_.end(), ByLogitDesc{});
    double cum = 0.0;
    for (size_t i = 0; i < cands_.size(); ++i) {
      cum += std::exp(double(cands_[i].logit) - m) / z;
      if (cum >= double(params_.top_p)) {
        cands_.resize(i + 1);
        break;
      }
    }
  }

  // Temperature. The maximum has weight exp(0) = 1, so total >= 1 even for tiny temperatures.
  const double inv_t = 1.0 / double(params_.temperature);  // finite: a float > 0 is >= 1.4e-45
  weights_.resize(cands_.size());
  for (size_t i = 0; i < cands_.size(); ++i) {
    weights_[i] = std::exp((double(cands_[i].logit) - m) * inv_t);
    total += weights_[i];
  }
  return -1;
}

int32_t Sampler::sample(const float* logits, int32_t n_vocab, std::span<const int32_t> history) {
  double total = 0.0;
  const int32_t greedy = prepare(logits, n_vocab, history, total);
  if (greedy >= 0) return greedy;
  if (inf_) {
    const size_t pick = std::min(cands_.size() - 1, size_t(uniform01() * double(cands_.size())));
    return cands_[pick].id;
  }
  const double u = uniform01() * total;
  double acc = 0.0;
  for (size_t i = 0; i < cands_.size(); ++i) {
    acc += weights_[i];
    if (u < acc) return cands_[i].id;
  }
  // Rounding can leave u >= acc by a hair: return the last candidate with non-zero weight.
  for (size_t i = cands_.size(); i-- > 0;)
    if (weights_[i] > 0.0) return cands_[i].id;
  return cands_.front().id;
}

void Sampler::distribution(const float* logits, int32_t n_vocab, std::span<const int32_t> history,
                           std::vector<TokenProb>& out) {
  out.clear();
  double total = 0.0;
  const int32_t greedy = prepare(logits, n_vocab, history, total);
  if (greedy >= 0) {
    out.push_back({greedy, 1.0});
    return;
  }
  if (inf_) {
    for (const auto& c : cands_) out.push_back({c.id, 1.0 / double(cands_.size())});
    return;
  }
  for (size_t i = 0; i < cands_.size(); ++i)
    if (weights_[i] > 0.0) out.push_back({cands_[i].id, weights_[i] / total});
}

}  // namespace polykv
