// Probes skipped where no draft can pay (engine/spec/spec_policy.h, 2026-12-02): in a batch whose
// step-cost fit says a sequence's drafts would lower the step's tokens per second even if every one were
// accepted, its due probe (and the drafter's catch-up it triggers) is skipped; where drafting can pay the
// probes stay; a sequence whose batch shrinks to one probes (or drafts) at once. No model: the policy's
// plans over simulated steps, with the costs measured through the server on the 2-core CPU (2026-12-01g).
#include <gtest/gtest.h>

#include <vector>

#include "engine/spec/spec_policy.h"

namespace polykv {
namespace {

// Step costs fitted through the server (POLYKV_SPEC_TRACE, 2026-12-02), in seconds: eight decoding
// sequences 2.1 ms + 0.3 ms per row, one sequence 1.6 ms + 0.35 ms per row.
const StepCostFit kEight = StepCostFit::exact(2.1e-3, 0.30e-3);
const StepCostFit kOne = StepCostFit::exact(1.6e-3, 0.35e-3);
// Drafters' fitted costs (per call, per token): the MTP head, the draft model, the n-gram drafter.
struct DraftCost {
  double call, token;
};
constexpr DraftCost kMtp{0.53e-3, 0.27e-3}, kDraftModel{0.45e-3, 0.20e-3}, kNgram{0, 0.005e-3};

DraftCandidate cand(const SpecSeqState& s, DraftCost d, int k_max = 3) {
  DraftCandidate c;
  c.acceptance = s.acceptance.rate;
  c.k_max = k_max;
  c.draft_seconds = d.token;
  c.draft_call_seconds = d.call;
  c.probe = s.probe_due();
  return c;
}

// One engine step of the sequences `seqs` (all decoding, one row each): bounds, plans, then every draft
// has the outcome `lands` (true: all kept; false: the first rejected). Returns drafted tokens.
int step(const StepCostFit& cost, std::vector<SpecSeqState>& seqs, DraftCost d, bool lands, int* probes_due = nullptr) {
  std::vector<DraftCandidate> c;
  const int n = int(seqs.size());
  for (const SpecSeqState& s : seqs) {
    c.push_back(cand(s, d));
    if (probes_due && c.back().probe) ++*probes_due;
    bound_in_batch(cost, n, c.back());
  }
  const std::vector<int> k = plan_drafts(cost, n, n, c);
  int drafted = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    seqs[i].after_step(k[i], lands ? k[i] : 0);
    drafted += k[i];
  }
  return drafted;
}

TEST(SpecProbeSkip, DraftCanPayComparesFullAcceptanceWithThePlainStep) {
  auto c = [](DraftCost d, int k_max) {
    DraftCandidate x;
    x.k_max = k_max, x.draft_seconds = d.token, x.draft_call_seconds = d.call;
    return x;
  };
  // Eight sequences: plain 8 / (2.1 + 2.4 ms) = 1.78 tokens per ms. Three accepted MTP drafts give
  // 3 / (0.53 + 3 * 0.57) = 1.34, the draft model's 3 / (0.45 + 3 * 0.5) = 1.54: neither pays;
  // n-gram drafts (nearly free) do: 3 / 0.915 = 3.3.
  EXPECT_FALSE(draft_can_pay(kEight, 8, 8, c(kMtp, 3)));
  EXPECT_FALSE(draft_can_pay(kEight, 8, 8, c(kDraftModel, 3)));
  EXPECT_TRUE(draft_can_pay(kEight, 8, 8, c(kNgram, 3)));
  // One sequence: plain 1 / 1.95 ms; three accepted MTP drafts 3 / 2.39 ms: they pay.
  EXPECT_TRUE(draft_can_pay(kOne, 1, 1, c(kMtp, 3)));
  EXPECT_TRUE(draft_can_pay(kOne, 1, 1, c(kDraftModel, 1)));
  // A batch with prompt rows (88 rows, 8 tokens) is dear per token: drafts pay there.
  EXPECT_TRUE(draft_can_pay(kEight, 88, 8, c(kMtp, 3)));
  // The boundary: fixed 4, 1 per row, eight rows: plain 8 / 12; a draft of cost t per token pays iff
  // 1 / (1 + t) > 8 / 12, i.e. t < 0.5 (per call 0, any k).
  const StepCostFit unit = StepCostFit::exact(4, 1);
  EXPECT_TRUE(draft_can_pay(unit, 8, 8, c({0, 0.49}, 1)));
  EXPECT_TRUE(draft_can_pay(unit, 8, 8, c({0, 0.49}, 3)));
  EXPECT_FALSE(draft_can_pay(unit, 8, 8, c({0, 0.51}, 3)));
  // A per-call cost is spread over more drafts: k_max decides.
  EXPECT_FALSE(draft_can_pay(unit, 8, 8, c({0.3, 0.3}, 1)));  // 1 / 1.6 < 2/3
  EXPECT_TRUE(draft_can_pay(unit, 8, 8, c({0.3, 0.3}, 2)));   // 2 / 2.9 > 2/3
  EXPECT_FALSE(draft_can_pay(unit, 8, 8, c({0.3, 0.42}, 3)));  // 3 / 4.56 < 2/3
  EXPECT_FALSE(draft_can_pay(unit, 8, 8, c({0, 0}, 0)));      // no drafts allowed
}

// Near the break-even (drafts that beat the plain step by less than kProbeMargin at acceptance 1) a batch
// makes no probes (their catch-up is not in the plan; the fit is not that exact), but drafts planned on
// merit stay: a sequence whose estimate is high drafts.
TEST(SpecProbeSkip, ProbesNeedAMarginPlannedDraftsDoNot) {
  const StepCostFit unit = StepCostFit::exact(4, 1);  // eight rows: plain 8 / 12
  auto one = [&](double a, double tok, bool probe) {
    std::vector<DraftCandidate> c(8);
    for (auto& x : c) x.acceptance = 0.1, x.k_max = 3, x.draft_seconds = 10;  // the others never draft
    c[0] = {a, 3, tok, 0, probe};
    for (auto& x : c) bound_in_batch(unit, 8, x);
    return plan_drafts(unit, 8, 8, c)[0];
  };
  // tok 0.35: accepted drafts give 1 / 1.35 = 0.74, 11% above 2/3: no probe; a high estimate drafts.
  EXPECT_TRUE(draft_can_pay(unit, 8, 8, {1, 3, 0.35, 0, false}));
  EXPECT_FALSE(draft_can_pay(unit, 8, 8, {1, 3, 0.35, 0, false}, kProbeMargin));
  EXPECT_EQ(one(0.6, 0.35, true), 0);
  EXPECT_GE(one(0.995, 0.35, false), 1);
  // tok 0.1: 1 / 1.1 = 0.91, 36% above: the probe is made.
  EXPECT_EQ(one(0.6, 0.1, true), 1);
  // tok 0.6: 1 / 1.6 < 2/3: nothing, not even at acceptance 0.995.
  EXPECT_EQ(one(0.995, 0.6, true), 0);
  // One sequence is not bounded (fixed 4 + 1 row: plain 1 / 5; 1 / 4.5 is 11% above): it probes.
  DraftCandidate single{0.1, 1, 3.5, 0, true};
  bound_in_batch(unit, 1, single);
  EXPECT_EQ(plan_drafts(unit, 1, 1, std::span(&single, 1)), std::vector<int>{1});
}

// The first steps of 8 agents: some decode while others' prompts are prefilled. Such a step is dear per
// token, so accepted drafts would pay in it; but a drafter that cannot pay in the decode-only step of
// the batch (all 8 decoding) would catch up (pool copy, suffix) to draft for a step or two. It drafts
// nothing; the n-gram drafter (nothing to catch up, pays in the decode-only step too) still does.
TEST(SpecProbeSkip, PromptRowsDoNotMakeABatchDraftWhatItsDecodesCannotPay) {
  auto plan = [](const StepCostFit& cost, int batch, int rows, DraftCost d, size_t decoding) {
    std::vector<DraftCandidate> c(decoding);
    for (auto& x : c) {
      x.acceptance = 0.9, x.k_max = 3, x.draft_seconds = d.token, x.draft_call_seconds = d.call;
      bound_in_batch(cost, batch, x);
    }
    return plan_drafts(cost, rows, int(decoding), c);
  };
  // 4 decode, 4 prefill (88 rows): unbounded, every decoding MTP agent would draft 3.
  EXPECT_EQ(plan(kEight, 1, 88, kMtp, 4), std::vector<int>(4, 3));
  EXPECT_EQ(plan(kEight, 8, 88, kMtp, 4), std::vector<int>(4, 0));
  EXPECT_EQ(plan(kEight, 8, 88, kDraftModel, 4), std::vector<int>(4, 0));
  EXPECT_EQ(plan(kEight, 8, 88, kNgram, 4), std::vector<int>(4, 3));
  // 1 decodes, 7 prefill (the first step of the server benchmark's 8 agents): bounded by the batch of 8.
  EXPECT_EQ(plan(kEight, 8, 120, kMtp, 1), std::vector<int>{0});
  // 1 decodes beside another request's prompt (a batch of 2, here with one sequence's costs): drafts.
  EXPECT_EQ(plan(kOne, 2, 64, kMtp, 1), std::vector<int>{3});
}

// The 8 agents of the server benchmark with the MTP head or the draft model: high acceptance, the
// plan never drafts for cost, and before 2026-12-02 each sequence still probed (8, 16, 32, 64 steps
// apart: 4 probes in 128 steps, each catching up the tokens since the last). Now: none.
TEST(SpecProbeSkip, ACostBoundBatchMakesNoProbes) {
  for (DraftCost d : {kMtp, kDraftModel}) {
    std::vector<SpecSeqState> seqs(8);
    for (size_t i = 0; i < seqs.size(); ++i) seqs[i].acceptance.rate = 0.1 + 0.12 * double(i);  // 0.1 .. 0.94
    int drafted = 0, due = 0;
    for (int t = 0; t < 512; ++t) drafted += step(kEight, seqs, d, true, &due);
    EXPECT_EQ(drafted, 0);
    EXPECT_GT(due, 8 * 400);  // due every step from the 8th on, and skipped
    for (const SpecSeqState& s : seqs) EXPECT_TRUE(s.probe_due());
  }
}

// Where drafting can pay (the n-gram drafter at eight sequences, or a dear drafter at one
// sequence), due probes are still made, and drafts that land are planned on merit.
TEST(SpecProbeSkip, ABatchWhereDraftingPaysStillProbesAndDrafts) {
  std::vector<SpecSeqState> seqs(8);
  for (SpecSeqState& s : seqs)
    for (int j = 0; j < 20; ++j) s.acceptance.update(1, 0);  // nothing landed lately: k = 0 on merit
  int drafted = 0;
  for (int t = 0; t < 256; ++t) drafted += step(kEight, seqs, kNgram, false);
  EXPECT_GE(drafted, 8 * 4);      // probes at 8, 16, 32, 64, 64 ... steps per sequence
  EXPECT_LE(drafted, 8 * 8);
  // Drafts start landing: the probes raise the estimate and the batch drafts n-max on merit.
  int last = 0;
  for (int t = 0; t < 200; ++t) last = step(kEight, seqs, kNgram, true);
  EXPECT_EQ(last, 8 * 3);
  // One sequence with a drafter that cannot pay even there still probes (its probes are what
  // re-measure a drafter cost made too high by a load spike).
  std::vector<SpecSeqState> one(1);
  drafted = 0;
  for (int t = 0; t < 128; ++t) drafted += step(kOne, one, {0, 5e-3}, true);
  EXPECT_GT(drafted, 0);
}

// An agent of a cost-bound batch whose batch shrinks to itself (the others finished): its probe was
// due all along, so it drafts at its first step alone; with landing drafts it drafts n-max soon.
TEST(SpecProbeSkip, RecoversWhenTheBatchShrinksToOneSequence) {
  for (bool low : {false, true}) {  // acceptance estimate high (plans drafts at once) or low (probes)
    SCOPED_TRACE(low);
    std::vector<SpecSeqState> seqs(8);
    for (SpecSeqState& s : seqs)
      for (int j = 0; j < 10; ++j) s.acceptance.update(1, low ? 0 : 1);
    int drafted = 0;
    for (int t = 0; t < 200; ++t) drafted += step(kEight, seqs, kMtp, true);
    ASSERT_EQ(drafted, 0);
    seqs.resize(1);
    EXPECT_GE(step(kOne, seqs, kMtp, true), 1);  // a probe or a planned draft, at once
    int first_full = -1;
    for (int t = 0; t < 64 && first_full < 0; ++t)
      if (step(kOne, seqs, kMtp, true) == 3) first_full = t;
    ASSERT_GE(first_full, 0);
    // Low: probes 8 steps apart (each lands: recovery) until the estimate plans drafts (34 steps here).
    EXPECT_LE(first_full, low ? 5 * SpecSeqState::kProbeEvery : 0);
  }
}

// A drafter's first steady sample carrying a one-time cost (0.95 ms per token for an MTP head whose
// later drafts cost 0.15-0.35 ms) no longer sets the cost alone: until kWarmSamples samples the fit
// answers 0, so one sequence keeps drafting and the fit follows the later samples. Before, the plan saw
// 1 ms per token after the first sample and drafted only probes for the rest of the request.
TEST(SpecProbeSkip, ADrafterFirstSampleDoesNotStopDrafting) {
  DraftCostFit f;
  f.add(1, 2, 1.9e-3);
  EXPECT_EQ(f.per_token(), 0);
  EXPECT_EQ(f.per_call(), 0);
  SpecSeqState s;
  DraftCostFit cost;
  cost.add(1, 2, 1.9e-3);  // the outlier
  int drafted = 0;
  for (int t = 0; t < 60; ++t) {
    DraftCandidate c{s.acceptance.rate, 3, cost.per_token(), cost.per_call(), s.probe_due()};
    const int k = plan_drafts(kOne, 1, 1, std::span(&c, 1))[0];
    if (k > 0) cost.add(1, k, 0.1e-3 + 0.25e-3 * k);  // what drafting really costs
    s.after_step(k, k > 1 ? k - 1 : k);               // most drafts land
    drafted += k;
  }
  EXPECT_GT(drafted, 60);
  EXPECT_LT(cost.per_token() + cost.per_call(), 0.6e-3);
}

}  // namespace
}  // namespace polykv
