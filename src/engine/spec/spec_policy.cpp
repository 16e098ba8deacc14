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
  if (w_ >= kClipAfter) seconds = std::min(seconds, kClip * cost(rows));  // a preempted pass: an outlier
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

int StepCostModel::bucket(int seqs) {
  if (seqs <= 1) return 0;
  if (seqs == 2) return 1;
  if (seqs <= 4) return 2;
  if (seqs <= 8) return 3;
  if (seqs <= 16) return 4;
  return 5;
}

const StepCostFit& StepCostModel::fit(int seqs) const {
  const int b = bucket(seqs);
  for (int d = 0; d < kBuckets; ++d) {
    if (b - d >= 0 && !fits_[size_t(b - d)].empty()) return fits_[size_t(b - d)];
    if (b + d < kBuckets && !fits_[size_t(b + d)].empty()) return fits_[size_t(b + d)];
  }
  return fits_[size_t(b)];
}

StepCostModel StepCostModel::exact(double fixed, double per_row) {
  StepCostModel m;
  for (auto& f : m.fits_) f = StepCostFit::exact(fixed, per_row);
  return m;
}

void DraftCostFit::add(int calls, int tokens, double seconds) {
  if (exact_ || calls <= 0 || tokens <= 0 || !(seconds >= 0) || !std::isfinite(seconds)) return;
  if (w_ >= kClipAfter) {  // a preempted draft: an outlier
    const double pred = per_call() * calls + per_token() * tokens;
    if (pred > 0) seconds = std::min(seconds, kClip * pred);
  }
  const double c = calls, n = tokens;
  ++n_;
  w_ = kDecay * w_ + 1;
  scc_ = kDecay * scc_ + c * c;
  scn_ = kDecay * scn_ + c * n;
  snn_ = kDecay * snn_ + n * n;
  sct_ = kDecay * sct_ + c * seconds;
  snt_ = kDecay * snt_ + n * seconds;
}

DraftCostFit DraftCostFit::exact(double per_call, double per_token) {
  DraftCostFit f;
  f.exact_ = true;
  f.a_ = std::max(0.0, per_call);
  f.b_ = std::max(0.0, per_token);
  return f;
}

// Normal equations of min sum w (t - a c - b n)^2 + kRidge * Scc * a^2:
//   [Scc (1 + ridge), Scn; Scn, Snn] [a; b] = [Sct; Snt]. A negative part refits the other alone.
void DraftCostFit::solve(double& a, double& b) const {
  if (exact_) {
    a = a_, b = b_;
    return;
  }
  a = b = 0;
  if (w_ <= 0 || snn_ <= 0 || n_ < kWarmSamples) return;
  const double m11 = scc_ * (1 + kRidge), det = m11 * snn_ - scn_ * scn_;
  if (det > 1e-12 * m11 * snn_) {
    a = (sct_ * snn_ - scn_ * snt_) / det;
    b = (m11 * snt_ - scn_ * sct_) / det;
  } else {
    a = -1;  // collinear beyond the ridge: all on the tokens
  }
  if (a < 0) a = 0, b = snt_ / snn_;
  if (b < 0) b = 0, a = sct_ / m11;
  a = std::max(0.0, a), b = std::max(0.0, b);
}

double DraftCostFit::per_call() const {
  double a, b;
  solve(a, b);
  return a;
}

double DraftCostFit::per_token() const {
  double a, b;
  solve(a, b);
  return b;
}

std::vector<int> plan_drafts(const StepCostFit& cost, int base_rows, int base_tokens,
                             std::span<const DraftCandidate> cands) {
  const size_t n = cands.size();
  std::vector<int> k(n, 0);
  const double per_row = cost.per_row();
  const double t0 = std::max(1, base_tokens), s0 = cost.cost(std::max(1, base_rows));
  // gain[i][j], price[i][j]: expected extra tokens and seconds of candidate i drafting j tokens.
  std::vector<std::vector<double>> gain(n), price(n);
  for (size_t i = 0; i < n; ++i) {
    const DraftCandidate& c = cands[i];
    const double a = std::clamp(c.acceptance, 0.0, 1.0), tok = std::max(0.0, c.draft_seconds),
                 call = std::max(0.0, c.draft_call_seconds);
    const int kmax = std::max(0, c.k_max);
    gain[i].assign(size_t(kmax) + 1, 0.0);
    price[i].assign(size_t(kmax) + 1, 0.0);
    double p = 1;
    for (int j = 1; j <= kmax; ++j) {
      p *= a;
      gain[i][size_t(j)] = gain[i][size_t(j) - 1] + p;
      price[i][size_t(j)] = call + j * (per_row + tok);
    }
  }
  // Dinkelbach: lambda rises strictly each round until the plan is optimal (finitely many plans).
  double lambda = t0 / s0;
  for (int round = 0; round < 64; ++round) {
    double tokens = t0, seconds = s0;
    std::vector<int> next(n, 0);
    for (size_t i = 0; i < n; ++i) {
      double best = 0;  // k = 0: nothing gained, nothing paid
      for (size_t j = 1; j < gain[i].size(); ++j) {
        const double v = gain[i][j] - lambda * price[i][j];
        if (v > best * (1 + 1e-12) + 1e-300) best = v, next[i] = int(j);
      }
      tokens += gain[i][size_t(next[i])];
      seconds += price[i][size_t(next[i])];
    }
    const double ratio = tokens / seconds;
    if (!(ratio > lambda * (1 + 1e-12))) break;  // no plan beats the current one
    k = std::move(next);
    lambda = ratio;
  }
  for (size_t i = 0; i < n; ++i)
    if (cands[i].probe && k[i] == 0 && cands[i].k_max > 0) k[i] = 1;
  return k;
}

void bound_in_batch(const StepCostFit& cost, int batch_seqs, DraftCandidate& c) {
  if (batch_seqs < 2) return;
  if (!draft_can_pay(cost, batch_seqs, batch_seqs, c)) {
    c.k_max = 0;
    c.probe = false;
  } else if (!draft_can_pay(cost, batch_seqs, batch_seqs, c, kProbeMargin)) {
    c.probe = false;
  }
}

bool draft_can_pay(const StepCostFit& cost, int base_rows, int base_tokens, const DraftCandidate& c,
                   double margin) {
  if (c.k_max <= 0) return false;
  // At acceptance 1, j drafts gain j tokens for call + j * (per_row + tok) seconds: a ratio rising in j,
  // so k_max drafts are the best case. They pay if that ratio beats the plain step's t0 / s0.
  const double t0 = std::max(1, base_tokens), s0 = cost.cost(std::max(1, base_rows));
  const double price = std::max(0.0, c.draft_call_seconds) +
                       c.k_max * (cost.per_row() + std::max(0.0, c.draft_seconds));
  return c.k_max * s0 > (1 + std::max(0.0, margin)) * t0 * price;
}

void SpecSeqState::after_step(int drafted, int accepted, int source) {
  if (drafted > 0) {
    const bool probe = probe_due();  // drafted after probe_interval - 1 steps without drafts
    // A probe can only change the plan through the acceptance estimate: when the estimate was already
    // at least the prior, the sequence was not drafting for cost (a drafter or a batch dearer than what
    // its drafts save), so a landed probe says nothing new and backs off like a rejected one.
    AcceptanceEma& acceptance = of(source);
    const bool was_low = acceptance.rate < AcceptanceEma::kPrior;
    acceptance.update(drafted, accepted);
    steps_without_drafts = 0;
    if (!probe || (accepted == drafted && was_low)) probe_interval = kProbeEvery;  // merit, or recovery
    else probe_interval = std::min(kProbeMax, 2 * probe_interval);
  } else {
    ++steps_without_drafts;
  }
}

}  // namespace polykv
