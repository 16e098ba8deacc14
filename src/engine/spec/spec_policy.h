// Adaptive speculation (issue #10): how many tokens each sequence drafts this step, from its recent
// acceptance and measured costs, so that speculation never costs more than it earns (down to no
// drafts while it does not pay). `--spec-n-max` stays the upper bound.
//
// Model. A step with R target rows costs T(R) = fixed + per_row * R seconds (StepCostFit), fitted
// separately per number of decoding sequences in the step (StepCostModel: one sequence on a CPU pays
// a large fixed part per pass, a batch of eight mostly its rows; one line through both is wrong for
// both). A sequence with per-draft acceptance probability a (the probability that a draft is accepted
// given the earlier ones were) that drafts k tokens emits 1 + a + a^2 + ... + a^k tokens in
// expectation and costs k * per_row more target seconds plus its drafter's seconds,
// D(k) = per_call + per_token * k for k > 0, 0 for k = 0 (DraftCostFit, learned from measured
// drafting: a draft model pays a catch-up pass per call and a pass per token, the n-gram drafter
// almost nothing). plan_drafts() maximises the step's expected tokens per second exactly (Dinkelbach's
// iteration: for a ratio lambda, each sequence independently takes the k in [0, k_max] maximising
// gain(k) - lambda * cost(k); lambda becomes the plan's ratio; repeat until it stops rising). k = 0 for
// a sequence is an ordinary one-token step for it. Deterministic: equal inputs give equal plans (ties
// go to the smaller k).
//
// Consequences: one sequence on a CPU (fixed >> per_row) drafts the full n-max from modest
// acceptance when drafting is cheap; a batch of many decoding sequences (per_row * R comparable to
// fixed) drafts only where acceptance is high; low acceptance or a drafter dearer than what its
// accepted tokens save gives k = 0.
//
// Learning while not drafting: a sequence that has not drafted for `probe_interval` steps drafts one
// token (a probe), so its acceptance estimate follows the text and drafting resumes when drafts
// start landing again. A rejected probe doubles the interval (kProbeEvery .. kProbeMax steps: on a
// text where drafts rarely land, probes cost less than one row in kProbeMax); a step that drafts on
// its own merit resets it, and so does a probe that lands while the acceptance estimate is below the
// prior (recovery takes one long interval, then short ones). A probe that lands while the estimate is
// already high doubles the interval too: that sequence is not drafting for cost, not acceptance
// (8 MTP agents on a CPU: probes every 8 steps cost ~10% of the run, 2026-12-01g). Probes also give
// the step-cost fit rows that vary. In a batch where the sequence's drafts could not pay even if every
// one were accepted (bound_in_batch), it neither drafts nor probes; its probe stays due and is made at
// the first step where they could (the batch shrinks), 2026-12-02.
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
  // Once the fit has kClipAfter samples' weight, a sample is clipped to kClip x its prediction (wall
  // times of a loaded machine: a pass preempted for a time slice must not undo the fit).
  static constexpr double kClipAfter = 4, kClip = 3;
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

// Step-cost fits per number of decoding sequences in the step (buckets 1, 2, 3-4, 5-8, 9-16, 17+).
// fit(n) is n's bucket once it has samples, else the nearest bucket with samples (the smaller one on a
// tie), else an empty fit (its prior).
class StepCostModel {
 public:
  static constexpr int kBuckets = 6;
  static int bucket(int seqs);
  void add(int seqs, int rows, double seconds) { fits_[size_t(bucket(seqs))].add(rows, seconds); }
  const StepCostFit& fit(int seqs) const;
  // Every bucket exactly this (tests, EngineOptions::spec_cost_*).
  static StepCostModel exact(double fixed, double per_row);

 private:
  StepCostFit fits_[kBuckets];
};

// A drafter's seconds: D(k) = per_call + per_token * k for a call drafting k > 0 tokens, fitted to
// samples (calls, tokens, seconds) of steps (several sequences may draft in one sample) by
// exponentially weighted least squares without intercept, t = per_call * calls + per_token * tokens.
// A small ridge pulls per_call towards 0, so samples whose tokens per call never vary (a fixed k) put
// the cost on the tokens; both stay >= 0. Samples are steady drafts only (see Drafter::last_catch_up).
class DraftCostFit {
 public:
  static constexpr double kDecay = 0.9;   // about the last 10 samples count
  static constexpr double kRidge = 1e-3;  // per_call's pull towards 0, relative to the calls' weight
  static constexpr double kClipAfter = 4, kClip = 3;  // as StepCostFit's
  // Until kWarmSamples samples, per_call() and per_token() answer 0 (drafting looks free, so the plan
  // drafts and measures): a drafter's first samples carry one-time costs (its workspace growing, the
  // first pass after a pool copy), and one such sample set the cost alone (before the clip applies) and
  // stopped a single sequence from drafting for the rest of its request (2026-12-02: an MTP head's first
  // steady draft, 0.95 ms per token against 0.15-0.35 later).
  static constexpr int kWarmSamples = 3;
  void add(int calls, int tokens, double seconds);
  bool empty() const { return !exact_ && w_ <= 0; }
  double per_call() const;
  double per_token() const;
  double cost(int k) const { return k > 0 ? per_call() + per_token() * k : 0.0; }
  static DraftCostFit exact(double per_call, double per_token);

 private:
  void solve(double& a, double& b) const;  // a: per call, b: per token
  double w_ = 0, scc_ = 0, scn_ = 0, snn_ = 0, sct_ = 0, snt_ = 0;  // weighted sums of c^2, cn, n^2, ct, nt
  int n_ = 0;  // samples
  bool exact_ = false;
  double a_ = 0, b_ = 0;
};

// One decoding sequence with a drafter, as plan_drafts sees it.
struct DraftCandidate {
  double acceptance = AcceptanceEma::kPrior;  // per-draft acceptance probability
  int k_max = 0;                               // drafts allowed (n-max, budget, context, tokens left)
  double draft_seconds = 0;                    // the drafter's cost per drafted token
  double draft_call_seconds = 0;               // the drafter's cost per call (k > 0), on top
  bool probe = false;                          // draft at least one token (see above) when k_max > 0
};

// base_rows: the step's rows without drafts (decode rows of every sequence, prompt chunks);
// base_tokens: tokens the step emits without drafts (its decoding sequences). Returns k per candidate,
// the plan of the highest expected tokens per second (then probes: at least 1 where due).
std::vector<int> plan_drafts(const StepCostFit& cost, int base_rows, int base_tokens,
                             std::span<const DraftCandidate> cands);

// Whether some k in [1, c.k_max] raises the plain step's expected tokens per second (base_tokens /
// cost(base_rows)) when every draft is accepted (acceptance 1, the best case) by more than `margin`
// (a fraction): false when the verify rows and the drafter cost more than even accepted drafts save.
bool draft_can_pay(const StepCostFit& cost, int base_rows, int base_tokens, const DraftCandidate& c,
                   double margin = 0);

// A probe in a batch is made only where accepted drafts would beat the plain step by this fraction: its
// catch-up (the tokens since the sequence's last draft, up to kProbeMax) is not in the plan, drafts near
// the break-even gain nearly nothing, and a batch's fit of fixed and per-row cost moves by tens of
// percent between runs (its rows hardly vary: through the server, 8 sequences, fixed 1.6-4.7 ms,
// 2026-12-02), so that the draft model at 8 agents on this CPU sat on the bound and probed in some runs.
constexpr double kProbeMargin = 0.25;

// The batch bound (2026-12-02), applied to a candidate before plan_drafts: in a step of batch_seqs >= 2
// sequences (decoding or prefilling: the batch they will decode in), `cost` the fit for that many, a
// candidate whose drafts could not pay in the batch's decode-only step (batch_seqs rows and tokens)
// even if all were accepted drafts nothing (k_max = 0: no acceptance estimate would make the plan draft
// it, and a probe only refreshes that estimate), and one whose drafts would not beat it by kProbeMargin
// makes no probe (drafts planned on merit stay). Skipping a probe skips the drafter's catch-up over the
// tokens since its last draft (8 agents on this CPU with the draft model or the MTP head: the probes
// and catch-ups were the 9-12% left against plain decoding, 2026-12-01g); the probe stays due and is
// made at the first step where the bound allows it (the batch shrinks). The decode-only step, not the
// step itself: a step that also prefills prompt chunks is dear per token, so drafts would pay in it,
// but the drafter would first catch up (an agent's first draft: its pool's copy and its own suffix;
// costs the plan does not see) only to stop drafting once the prompts are done. One sequence keeps
// its probes: there the fixed part of a step makes drafts pay unless the drafter's cost estimate is
// several times too high (a load spike), and its probes are what re-measure that estimate; a batch's
// never do, so the estimate is refreshed only in smaller steps.
void bound_in_batch(const StepCostFit& cost, int batch_seqs, DraftCandidate& c);

// The per-sequence state of the adaptive policy: acceptance and the probe counter.
struct SpecSeqState {
  AcceptanceEma acceptance;      // the drafter's source 0 (a drafter's only source, or a hybrid's n-gram)
  AcceptanceEma acceptance_alt;  // source 1 (a hybrid's model drafter: Drafter::next_source)
  AcceptanceEma& of(int source) { return source == 1 ? acceptance_alt : acceptance; }
  const AcceptanceEma& of(int source) const { return source == 1 ? acceptance_alt : acceptance; }
  int steps_without_drafts = 0;
  static constexpr int kProbeEvery = 8, kProbeMax = 64;
  int probe_interval = kProbeEvery;
  bool probe_due() const { return steps_without_drafts + 1 >= probe_interval; }
  // After a step in which the sequence drafted `drafted` (0: none) from `source` and `accepted` of them were kept.
  void after_step(int drafted, int accepted, int source = 0);
};

}  // namespace polykv
