#include "engine/spec/spec_policy.h"

#include <algorithm>
#include <cmath>

namespace polykv {

void AcceptanceEma::update(int drafted, int accepted) {
  for (int i = 0; i < accepted; ++i) rate += kWeight * (1.0 - rate);
  if (accepted < drafted) rate += kWeight * (0.0 - rate);
  trials += accepted + (accepted < drafted ? 1 : 0);
}

void StepCostFit::add(int rows, double seconds) {
  if (exact_ || rows <= 0 || !(seconds >= 0) || !std::isfinite(seconds)) return;
  const double r = rows;
  w_ = kDecay * w_ + 1;
  sr_ = kDecay * sr_ + r;
  st_ = kDecay * st_ + seconds;
  srr_ = kDecay * srr_ + r * r;
  srt_ = kDecay * srt_ + r * seconds;
}

StepCostFit StepCostFit::exact(double fixed, double per_row) {
  StepCostFit f;
  f.exact_ = true;
  f.fixed_ = std::max(0.0, fixed);
  f.per_row_ = std::max(1e-12, per_row);
  f.w_ = 1;
  return f;
}

// Slope: the weighted least-squares slope, pulled towards the prior slope mean_T / (kPriorFixedRows +
// mean_R) with the weight of one unit of row variance (so a batch whose rows never vary keeps the
// prior; rows that vary by a few rows let the data decide).
double StepCostFit::per_row() const {
  if (exact_) return per_row_;
  if (w_ <= 0) return 1.0;
  const double mr = sr_ / w_, mt = st_ / w_;
  const double var = std::max(0.0, srr_ / w_ - mr * mr), cov = srt_ / w_ - mr * mt;
  const double prior = mt / (kPriorFixedRows + mr);
  constexpr double lambda = 1.0;
  double b = (cov + lambda * prior) / (var + lambda);
  if (mt - b * mr < 0) b = mt / mr;  // no negative fixed part: all of the cost per row
  return std::max(b, 1e-3 * prior + 1e-12);
}

double StepCostFit::fixed() const {
  if (exact_) return fixed_;
  if (w_ <= 0) return kPriorFixedRows;
  return std::max(0.0, st_ / w_ - per_row() * (sr_ / w_));
}

std::vector<int> plan_drafts(const StepCostFit& cost, int base_rows, int base_tokens,
                             std::span<const DraftCandidate> cands) {
  std::vector<int> k(cands.size(), 0);
  const double per_row = cost.per_row();
  double tokens = std::max(1, base_tokens), seconds = cost.cost(std::max(1, base_rows));
  std::vector<double> next_gain(cands.size());  // a^(k+1) of each candidate's next draft
  for (size_t i = 0; i < cands.size(); ++i) next_gain[i] = std::clamp(cands[i].acceptance, 0.0, 1.0);
  for (;;) {
    // The next draft with the highest gain per second (ties: the lower index).
    int best = -1;
    double best_value = 0;
    for (size_t i = 0; i < cands.size(); ++i) {
      if (k[i] >= cands[i].k_max) continue;
      const double value = next_gain[i] / (per_row + std::max(0.0, cands[i].draft_seconds));
      if (best < 0 || value > best_value) best = int(i), best_value = value;
    }
    if (best < 0 || !(best_value * seconds > tokens)) break;  // it would lower tokens per second
    const DraftCandidate& c = cands[size_t(best)];
    tokens += next_gain[size_t(best)];
    seconds += per_row + std::max(0.0, c.draft_seconds);
    next_gain[size_t(best)] *= std::clamp(c.acceptance, 0.0, 1.0);
    ++k[size_t(best)];
  }
  for (size_t i = 0; i < cands.size(); ++i)
    if (cands[i].probe && k[i] == 0 && cands[i].k_max > 0) k[i] = 1;
  return k;
}

void SpecSeqState::after_step(int drafted, int accepted) {
  if (drafted > 0) {
    const bool probe = probe_due();  // drafted after probe_interval - 1 steps without drafts
    acceptance.update(drafted, accepted);
    steps_without_drafts = 0;
    if (!probe) probe_interval = kProbeEvery;
    else if (accepted < drafted) probe_interval = std::min(kProbeMax, 2 * probe_interval);
  } else {
    ++steps_without_drafts;
  }
}

}  // namespace polykv
