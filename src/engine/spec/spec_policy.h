// Adaptive speculation (issue #10): how many tokens each sequence drafts this step, from its recent
// acceptance and a cost model of the target's step, so that speculation never costs more than it
// earns (down to no drafts while it does not pay). `--spec-n-max` stays the upper bound.
//
// Model. A step with R target rows costs T(R) = fixed + per_row * R seconds (StepCostFit: on a CPU
// the step's cost grows with the total rows of the batch; `fixed` is what a one-row step pays once:
// reading the weights, per-op overheads). A sequence with per-draft acceptance probability a (the
// probability that a draft is accepted given the earlier ones were) that drafts k tokens emits
// 1 + a + a^2 + ... + a^k tokens in expectation; its j-th draft costs per_row + draft_cost (the
// drafter's own seconds per drafted token). plan_drafts() maximises the step's expected tokens per
// second: starting from the step without drafts (every decoding sequence emits 1 token, R = base
// rows), it adds drafts in order of gain per cost (a^j / (per_row + draft_cost)) while each one
// raises the ratio, i.e. while a^j / cost_j > tokens / seconds so far. Gains fall with j, so the
// first draft that does not pay ends the plan. Deterministic: equal inputs give equal plans (ties go
// to the lower index).
//
// Consequences: one sequence on a CPU (fixed >> per_row) drafts the full n-max from modest
// acceptance; a batch of many decoding sequences (per_row * R comparable to fixed) drafts only
// where acceptance is high; low acceptance gives k = 0 (an ordinary one-token step).
//
// Learning while not drafting: a sequence that has not drafted for `probe_interval` steps drafts one
// token (a probe), so its acceptance estimate follows the text and drafting resumes when drafts
// start landing again. A rejected probe doubles the interval (kProbeEvery .. kProbeMax steps: on a
// text where drafts rarely land, probes cost less than one row in kProbeMax); a step that drafts
// on its own merit resets it.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace polykv {

// Per-draft acceptance probability, an exponential moving average over drafted tokens: each step
// with k drafts and n accepted is n successes followed (if n < k) by one failure; drafts after the
// first rejection are not trials (they were never checked).
struct AcceptanceEma {
  static constexpr double kPrior = 0.6;   // before any draft: optimistic enough to try
  static constexpr double kWeight = 0.15; // weight of one trial (about the last 6-7 trials count)
  double rate = kPrior;
  int64_t trials = 0;
  void update(int drafted, int accepted);
};

// A linear fit T(R) = fixed + per_row * R of measured step seconds against rows, exponentially
// weighted (older samples decay by `decay` per sample). While the rows have not varied enough to
// fix the slope, the slope leans on a prior: a step's fixed part equals kPriorFixedRows rows.
class StepCostFit {
 public:
  static constexpr double kDecay = 0.97;
  static constexpr double kPriorFixedRows = 4.0;
  void add(int rows, double seconds);
  bool empty() const { return w_ <= 0; }
  double fixed() const;    // seconds, >= 0
  double per_row() const;  // seconds, > 0
  double cost(int rows) const { return fixed() + per_row() * rows; }
  // A fit with exactly these parameters (tests, --spec-policy fixed costs).
  static StepCostFit exact(double fixed, double per_row);

 private:
  double w_ = 0, sr_ = 0, st_ = 0, srr_ = 0, srt_ = 0;  // weighted sums of 1, R, T, R^2, R*T
  bool exact_ = false;
  double fixed_ = 0, per_row_ = 0;
};

// One decoding sequence with a drafter, as plan_drafts sees it.
struct DraftCandidate {
  double acceptance = AcceptanceEma::kPrior;  // per-draft acceptance probability
  int k_max = 0;                               // drafts allowed (n-max, budget, context, tokens left)
  double draft_seconds = 0;                    // the drafter's cost per drafted token
  bool probe = false;                          // draft at least one token (see above) when k_max > 0
};

// base_rows: the step's rows without drafts (decode rows of every sequence, prompt chunks);
// base_tokens: tokens the step emits without drafts (its decoding sequences). Returns k per candidate.
std::vector<int> plan_drafts(const StepCostFit& cost, int base_rows, int base_tokens,
                             std::span<const DraftCandidate> cands);

// The per-sequence state of the adaptive policy: acceptance and the probe counter.
struct SpecSeqState {
  AcceptanceEma acceptance;
  int steps_without_drafts = 0;
  static constexpr int kProbeEvery = 8, kProbeMax = 64;
  int probe_interval = kProbeEvery;
  bool probe_due() const { return steps_without_drafts + 1 >= probe_interval; }
  // After a step in which the sequence drafted `drafted` (0: none) and `accepted` of them were kept.
  void after_step(int drafted, int accepted);
};

}  // namespace polykv
