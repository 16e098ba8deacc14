// The adaptive policy's cost side (engine/spec/spec_policy.h, 2026-12-01d): the drafter's cost per
// call and per drafted token, the step cost per number of decoding sequences, and plan_drafts'
// exact choice of k (0 = no speculation) from synthetic timings and acceptance; probes that let a
// sequence resume drafting once its drafts start landing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "engine/spec/spec_policy.h"

namespace polykv {
namespace {

// Expected tokens per second of a plan (the quantity plan_drafts maximises).
double ratio(const StepCostFit& cost, int base_rows, int base_tokens, const std::vector<DraftCandidate>& c,
             const std::vector<int>& k) {
  double tokens = base_tokens, seconds = cost.cost(base_rows);
  for (size_t i = 0; i < c.size(); ++i) {
    for (int j = 1; j <= k[i]; ++j) tokens += std::pow(c[i].acceptance, j);
    if (k[i] > 0) seconds += c[i].draft_call_seconds + k[i] * (cost.per_row() + c[i].draft_seconds);
  }
  return tokens / seconds;
}

std::vector<int> plan1(const StepCostFit& cost, double a, int k_max, double per_token, double per_call = 0) {
  const std::vector<DraftCandidate> c{{a, k_max, per_token, per_call, false}};
  return plan_drafts(cost, 1, 1, c);
}

// The quiet server measurement of 2026-12-01c, one agent, in ms: a one-row step 1.6, four rows 2.6.
const StepCostFit kOneSeq = StepCostFit::exact(1.27e-3, 0.33e-3);

TEST(SpecPolicyCost, ChoosesNoDraftsWhenDraftingCostsMoreThanItSaves) {
  // 87.5% acceptance (the draft model's): a 0.2 ms draft pays for every position up to n-max ...
  EXPECT_EQ(plan1(kOneSeq, 0.875, 3, 0.2e-3), std::vector<int>{3});
  // ... a drafter that costs as much as the step saves does not: k = 0, plain decoding.
  EXPECT_EQ(plan1(kOneSeq, 0.875, 3, 1.5e-3), std::vector<int>{0});
  // A per-call cost alone (a catch-up pass) above what the accepted tokens save: no drafts either.
  EXPECT_EQ(plan1(kOneSeq, 0.875, 3, 0, 6e-3), std::vector<int>{0});
  // Low acceptance: no drafts even when drafting is free, since the verify rows cost.
  EXPECT_EQ(plan1(kOneSeq, 0.15, 3, 0), std::vector<int>{0});
}

TEST(SpecPolicyCost, ChoosesLargerDraftsWhenCheapAndAccepted) {
  int last = 0;
  for (double a : {0.3, 0.5, 0.7, 0.9, 0.99}) {  // k never falls as acceptance rises
    const int k = plan1(kOneSeq, a, 8, 0.05e-3)[0];
    EXPECT_GE(k, last) << a;
    last = k;
  }
  EXPECT_EQ(last, 8);
  // A cheaper drafter drafts at least as far.
  EXPECT_GE(plan1(kOneSeq, 0.7, 8, 0)[0], plan1(kOneSeq, 0.7, 8, 0.5e-3)[0]);
}

TEST(SpecPolicyCost, APerCallCostIsPaidOnceSoLongDraftsCanPayWhereOneDoesNot) {
  // One draft does not pay for the call, three do: a greedy plan that stops at the first draft
  // that lowers the ratio would draft nothing here.
  const StepCostFit cost = StepCostFit::exact(1.0, 0.1);
  EXPECT_EQ(plan1(cost, 0.9, 1, 0, 1.0), std::vector<int>{0});  // (1 + 0.9) / 2.2 < 1 / 1.1
  EXPECT_EQ(plan1(cost, 0.9, 3, 0, 1.0), std::vector<int>{3});  // (1 + 2.439) / 2.4 > 1 / 1.1
}

TEST(SpecPolicyCost, PlanIsTheBestOfAllPlans) {
  // Brute force over every plan of three sequences with per-call and per-token costs.
  uint64_t x = 12345;
  auto rnd = [&] {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return double(x >> 11) / double(1ull << 53);
  };
  for (int trial = 0; trial < 200; ++trial) {
    const StepCostFit cost = StepCostFit::exact(rnd() * 3, 0.2 + rnd());
    std::vector<DraftCandidate> c(3);
    for (auto& d : c) d = {rnd(), int(rnd() * 5), rnd() * 0.5, rnd() * 2, false};
    const std::vector<int> k = plan_drafts(cost, 3, 3, c);
    double best = 0;
    for (int k0 = 0; k0 <= c[0].k_max; ++k0)
      for (int k1 = 0; k1 <= c[1].k_max; ++k1)
        for (int k2 = 0; k2 <= c[2].k_max; ++k2) best = std::max(best, ratio(cost, 3, 3, c, {k0, k1, k2}));
    EXPECT_NEAR(ratio(cost, 3, 3, c, k), best, 1e-9 * best) << trial;
    for (size_t i = 0; i < 3; ++i) EXPECT_LE(k[i], c[i].k_max);
  }
}

TEST(SpecPolicyCost, DraftCostFitSeparatesCallsFromTokens) {
  DraftCostFit f;
  EXPECT_TRUE(f.empty());
  for (int i = 0; i < 60; ++i) {
    const int calls = 1 + i % 3, tokens = calls * (1 + (i * 7) % 4);
    f.add(calls, tokens, calls * 0.4e-3 + tokens * 0.25e-3);
  }
  EXPECT_NEAR(f.per_call(), 0.4e-3, 0.02e-3);
  EXPECT_NEAR(f.per_token(), 0.25e-3, 0.01e-3);
  EXPECT_NEAR(f.cost(3), 0.4e-3 + 3 * 0.25e-3, 0.05e-3);
  EXPECT_EQ(f.cost(0), 0);
  // Always three tokens per call (a fixed k): the split is not identified; the cost goes on the tokens.
  DraftCostFit g;
  for (int i = 0; i < 30; ++i) g.add(1, 3, 0.9e-3);
  EXPECT_NEAR(g.per_token(), 0.3e-3, 0.01e-3);
  EXPECT_NEAR(g.per_call(), 0, 0.01e-3);
  // A preempted draft (50x its time) moves the fit by a bounded amount.
  g.add(1, 3, 45e-3);
  EXPECT_LT(g.per_token(), 0.6e-3);
}

TEST(SpecPolicyCost, StepCostIsFittedPerNumberOfSequences) {
  // One sequence: 1.27 ms + 0.33 ms per row; eight: every row ~0.8 ms, no fixed part. A single line
  // through both (the policy before 2026-12-01d) gives one sequence a fixed part of ~0.3 ms, so that
  // 87.5% acceptance with a 0.3 ms drafter drafted nothing after an 8-agent run.
  StepCostModel m;
  for (int i = 0; i < 100; ++i) {
    const int r1 = 1 + i % 4, r8 = 9 + (i * 5) % 22;
    m.add(1, r1, 1.27e-3 + 0.33e-3 * r1);
    m.add(8, r8, 0.8e-3 * r8);
  }
  EXPECT_NEAR(m.fit(1).fixed(), 1.27e-3, 0.02e-3);
  EXPECT_NEAR(m.fit(1).per_row(), 0.33e-3, 0.01e-3);
  EXPECT_NEAR(m.fit(8).per_row(), 0.8e-3, 0.02e-3);
  EXPECT_NEAR(m.fit(6).per_row(), 0.8e-3, 0.02e-3);  // the same bucket
  EXPECT_NEAR(m.fit(2).fixed(), 1.27e-3, 0.02e-3);   // no samples with 2: the nearest bucket
  EXPECT_EQ(plan1(m.fit(1), 0.875, 3, 0.3e-3), std::vector<int>{3});
  StepCostFit one_line;
  for (int i = 0; i < 100; ++i) {
    const int r1 = 1 + i % 4, r8 = 9 + (i * 5) % 22;
    one_line.add(r1, 1.27e-3 + 0.33e-3 * r1);
    one_line.add(r8, 0.8e-3 * r8);
  }
  EXPECT_EQ(plan1(one_line, 0.875, 3, 0.3e-3), std::vector<int>{0});
}

TEST(SpecPolicyCost, RecoversAfterProbingWhenDraftsStartLanding) {
  // A sequence whose drafts are all rejected for 300 steps, then all accepted. Cheap drafting on one
  // sequence: as soon as the estimate says drafts land, it drafts n-max.
  const int k_max = 3, switch_at = 300;
  SpecSeqState s;
  int drafted_before = 0, first_landed = -1, first_full = -1;
  for (int step = 0; step < 600; ++step) {
    const DraftCandidate c{s.acceptance.rate, k_max, 0.05e-3, 0, s.probe_due()};
    const int k = plan_drafts(kOneSeq, 1, 1, std::span(&c, 1))[0];
    const int accepted = step < switch_at ? 0 : k;
    if (step < switch_at) drafted_before += k;
    if (step >= switch_at && k > 0 && first_landed < 0) first_landed = step;  // the first probe that lands
    if (step >= switch_at && k == k_max && first_full < 0) first_full = step;
    s.after_step(k, accepted);
  }
  EXPECT_GT(drafted_before, 0);                 // it probed ...
  EXPECT_LT(drafted_before, switch_at / 8);     // ... rarely (back-off) while nothing lands
  ASSERT_GE(first_landed, 0);
  EXPECT_LE(first_landed, switch_at + SpecSeqState::kProbeMax);  // within the backed-off interval
  ASSERT_GE(first_full, 0);
  // A landed probe resets the interval, so the next probes come kProbeEvery apart and n-max drafting
  // resumes within two of them (before 2026-12-01d the interval stayed at kProbeMax: 64 steps more).
  EXPECT_LE(first_full - first_landed, 2 * SpecSeqState::kProbeEvery);
}

// A sequence whose drafts would land but whose drafter costs more than they save (the plan never
// drafts it on merit): its probes land, and they still back off to kProbeMax (before 2026-12-01g a
// landed probe reset the interval to kProbeEvery: a probe every 8 steps for nothing).
TEST(SpecPolicyCost, LandedProbesBackOffWhenDraftingDoesNotPay) {
  SpecSeqState s;
  for (int i = 0; i < 20; ++i) s.acceptance.update(1, 1);  // high acceptance
  int probes = 0;
  const int steps = 640;
  for (int step = 0; step < steps; ++step) {
    const DraftCandidate c{s.acceptance.rate, 3, /*draft_seconds=*/1.0, 0, s.probe_due()};  // 1 s per draft
    const int k = plan_drafts(kOneSeq, 1, 1, std::span(&c, 1))[0];
    EXPECT_LE(k, 1) << "only probes";
    probes += k;
    s.after_step(k, k);  // every probe lands
  }
  EXPECT_GT(probes, 0);
  EXPECT_LT(probes, steps / SpecSeqState::kProbeMax + 6);  // 8, 16, 32, 64, 64, ...: ~12, not 80
  EXPECT_EQ(s.probe_interval, SpecSeqState::kProbeMax);
}

}  // namespace
}  // namespace polykv
