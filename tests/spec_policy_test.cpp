// The adaptive speculation policy without a model (engine/spec/spec_policy.h): acceptance moving
// average, the step-cost fit, and plan_drafts' choice of k from acceptance and batch size.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/spec/spec_policy.h"

namespace polykv {
namespace {

std::vector<int> plan(const StepCostFit& cost, int n_seqs, double acceptance, int k_max, double draft_s = 0) {
  std::vector<DraftCandidate> c(static_cast<size_t>(n_seqs));
  for (auto& x : c) {
    x.acceptance = acceptance;
    x.k_max = k_max;
    x.draft_seconds = draft_s;
  }
  return plan_drafts(cost, n_seqs, n_seqs, c);
}

TEST(SpecPolicy, AcceptanceEmaCountsAcceptedDraftsAndTheFirstRejection) {
  AcceptanceEma a;
  a.update(3, 3);  // three successes
  EXPECT_GT(a.rate, AcceptanceEma::kPrior);
  EXPECT_EQ(a.trials, 3);
  const double after_hits = a.rate;
  a.update(3, 0);  // one failure: the drafts after it were never checked
  EXPECT_EQ(a.trials, 4);
  EXPECT_NEAR(a.rate, after_hits * (1 - AcceptanceEma::kWeight), 1e-12);
  for (int i = 0; i < 40; ++i) a.update(4, 0);
  EXPECT_LT(a.rate, 0.01);
  for (int i = 0; i < 40; ++i) a.update(2, 2);
  EXPECT_GT(a.rate, 0.99);
}

TEST(SpecPolicy, CostFitRecoversALinearStepCost) {
  StepCostFit f;
  for (int i = 0; i < 200; ++i) {
    const int rows = 8 + (i * 7) % 25;
    f.add(rows, 0.003 + 0.0008 * rows);
  }
  // Within 0.5%: the slope's pull towards the prior weighs one row^2 of variance against ~50 here.
  EXPECT_NEAR(f.fixed(), 0.003, 0.005 * 0.003);
  EXPECT_NEAR(f.per_row(), 0.0008, 0.005 * 0.0008);
}

TEST(SpecPolicy, CostFitWithoutVariationFallsBackToThePriorShape) {
  StepCostFit f;
  EXPECT_TRUE(f.empty());
  for (int i = 0; i < 50; ++i) f.add(8, 0.012);  // rows never vary: the slope is not identified
  // The prior: the fixed part is worth kPriorFixedRows rows.
  EXPECT_NEAR(f.per_row(), 0.012 / (StepCostFit::kPriorFixedRows + 8), 1e-9);
  EXPECT_NEAR(f.cost(8), 0.012, 1e-9);
  EXPECT_GT(f.fixed(), 0);
}

TEST(SpecPolicy, OneSequenceWithCheapRowsDraftsTheMaximum) {
  // A CPU decoding one sequence: the fixed part (the weights) costs 20 rows.
  const StepCostFit cost = StepCostFit::exact(20, 1);
  EXPECT_EQ(plan(cost, 1, 0.8, 3), std::vector<int>{3});
  EXPECT_EQ(plan(cost, 1, 0.3, 4), std::vector<int>{2});  // 0.3^2 = 0.09 > 1/21, 0.3^3 = 0.027 < 1.09/22
  EXPECT_EQ(plan(cost, 1, 0.02, 4), std::vector<int>{0});
}

TEST(SpecPolicy, ManySequencesDraftOnlyWhereAcceptanceIsHigh) {
  const StepCostFit cost = StepCostFit::exact(4, 1);  // the batch's rows dominate the step
  EXPECT_EQ(plan(cost, 8, 0.35, 3), std::vector<int>(8, 0));  // 0.35 < 8/12
  EXPECT_EQ(plan(cost, 8, 0.97, 3), std::vector<int>(8, 3));
  // The same acceptance drafts with one sequence, not with eight.
  EXPECT_EQ(plan(cost, 1, 0.6, 3), std::vector<int>{2});
  EXPECT_EQ(plan(cost, 8, 0.6, 3), std::vector<int>(8, 0));
  // Mixed: the sequence that drafts well drafts, the others not.
  std::vector<DraftCandidate> c(8);
  for (auto& x : c) x.acceptance = 0.2, x.k_max = 3;
  c[5].acceptance = 0.95;
  const std::vector<int> k = plan_drafts(cost, 8, 8, c);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(k[size_t(i)], i == 5 ? 3 : 0) << i;
}

TEST(SpecPolicy, KMaxDraftCostAndProbes) {
  const StepCostFit cost = StepCostFit::exact(20, 1);
  EXPECT_EQ(plan(cost, 1, 0.9, 2), std::vector<int>{2});   // never above k_max (n-max, budget)
  EXPECT_EQ(plan(cost, 1, 0.9, 0), std::vector<int>{0});
  EXPECT_EQ(plan(cost, 1, 0.6, 3, 40.0), std::vector<int>{0});  // a drafter dearer than the step
  std::vector<DraftCandidate> c(1);
  c[0].acceptance = 0.01;
  c[0].k_max = 3;
  c[0].probe = true;
  EXPECT_EQ(plan_drafts(cost, 1, 1, c), std::vector<int>{1});  // a probe drafts one token
  c[0].k_max = 0;
  EXPECT_EQ(plan_drafts(cost, 1, 1, c), std::vector<int>{0});
}

TEST(SpecPolicy, PlanNeverLowersExpectedTokensPerSecond) {
  // Brute force over k in [0, 4] for two sequences: the plan reaches the best ratio.
  const StepCostFit cost = StepCostFit::exact(6, 1);
  for (double a0 : {0.1, 0.4, 0.7, 0.9})
    for (double a1 : {0.2, 0.5, 0.8, 0.99}) {
      std::vector<DraftCandidate> c(2);
      c[0].acceptance = a0, c[0].k_max = 4;
      c[1].acceptance = a1, c[1].k_max = 4;
      auto ratio = [&](int k0, int k1) {
        double t = 2;
        for (int j = 1; j <= k0; ++j) t += std::pow(a0, j);
        for (int j = 1; j <= k1; ++j) t += std::pow(a1, j);
        return t / cost.cost(2 + k0 + k1);
      };
      double best = 0;
      for (int k0 = 0; k0 <= 4; ++k0)
        for (int k1 = 0; k1 <= 4; ++k1) best = std::max(best, ratio(k0, k1));
      const std::vector<int> k = plan_drafts(cost, 2, 2, c);
      EXPECT_NEAR(ratio(k[0], k[1]), best, 1e-12) << a0 << " " << a1;
    }
}

TEST(SpecPolicy, SeqStateProbesAfterStepsWithoutDrafts) {
  SpecSeqState s;
  for (int i = 0; i + 1 < SpecSeqState::kProbeEvery; ++i) {
    EXPECT_FALSE(s.probe_due()) << i;
    s.after_step(0, 0);
  }
  EXPECT_TRUE(s.probe_due());
  s.after_step(1, 0);  // the probe was rejected: the next one waits twice as long
  EXPECT_FALSE(s.probe_due());
  EXPECT_LT(s.acceptance.rate, AcceptanceEma::kPrior);
  EXPECT_EQ(s.probe_interval, 2 * SpecSeqState::kProbeEvery);
  for (int i = 0; i < 10; ++i) {  // rejected probes: the interval stops at kProbeMax
    while (!s.probe_due()) s.after_step(0, 0);
    s.after_step(1, 0);
  }
  EXPECT_EQ(s.probe_interval, SpecSeqState::kProbeMax);
  s.after_step(0, 0);
  s.after_step(3, 2);  // drafts planned on their own merit: probing starts over
  EXPECT_EQ(s.probe_interval, SpecSeqState::kProbeEvery);
}

}  // namespace
}  // namespace polykv
