// Sampler: each stage of the chain on hand-made distributions, determinism, empirical frequencies,
// and non-finite logits. A trick used below: temperature is the last stage, so a huge temperature
// makes the draw uniform over whatever set the truncation stages kept, exposing that set.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "core/error.h"
#include "engine/sampler.h"
#include "test_util.h"

namespace polykv {
namespace {

SamplingParams plain(float temperature) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.repeat_penalty = 1.0f;
  return p;
}

std::vector<float> log_probs(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(float(std::log(p)));
  return l;
}

std::set<int32_t> drawn_set(SamplingParams p, const std::vector<float>& logits, int draws = 2000) {
  Sampler s(p);
  std::set<int32_t> seen;
  for (int i = 0; i < draws; ++i) seen.insert(s.sample(logits.data(), int32_t(logits.size()), {}));
  return seen;
}

TEST(Sampler, GreedyPicksArgmax) {
  const auto logits = test::random_floats(5000, 7);
  const auto best = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
  Sampler s(plain(0.0f));
  for (int i = 0; i < 5; ++i) EXPECT_EQ(s.sample(logits.data(), 5000, {}), best);
}

TEST(Sampler, GreedyTieIsLowestId) {
  const std::vector<float> logits = {0.f, 3.f, 1.f, 3.f};
  Sampler s(plain(0.0f));
  EXPECT_EQ(s.sample(logits.data(), 4, {}), 1);
}

TEST(Sampler, TopK1IsGreedy) {
  const auto logits = test::random_floats(1000, 3);
  const auto best = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
  SamplingParams p = plain(1.5f);
  p.top_k = 1;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    p.seed = seed;
    Sampler s(p);
    EXPECT_EQ(s.sample(logits.data(), 1000, {}), best);
  }
}

TEST(Sampler, TopKKeepsKHighest) {
  const std::vector<float> logits = {0.1f, 5.f, -2.f, 4.f, 3.f, 2.9f};
  SamplingParams p = plain(1000.f);
  p.top_k = 3;
  EXPECT_EQ(drawn_set(p, logits), (std::set<int32_t>{1, 3, 4}));
}

TEST(Sampler, TopPKeepsShortestPrefixReachingP) {
  const auto logits = log_probs({0.05, 0.5, 0.15, 0.3});  // sorted: 1 (.5), 3 (.3), 2 (.15), 0 (.05)
  SamplingParams p = plain(1000.f);
  p.top_p = 0.7f;  // .5 < .7 <= .8
  EXPECT_EQ(drawn_set(p, logits), (std::set<int32_t>{1, 3}));
  p.top_p = 0.9f;  // .8 < .9 <= .95
  EXPECT_EQ(drawn_set(p, logits), (std::set<int32_t>{1, 3, 2}));
  p.top_p = 0.4f;  // the top token alone already reaches it
  EXPECT_EQ(drawn_set(p, logits), (std::set<int32_t>{1}));
}

TEST(Sampler, TopPUsesProbabilitiesOfTopKSet) {
  // After top-k=2 the set {1: .5, 3: .3} renormalizes to {.625, .375}: top-p .6 keeps only token 1.
  const auto logits = log_probs({0.05, 0.5, 0.15, 0.3});
  SamplingParams p = plain(1000.f);
  p.top_k = 2;
  p.top_p = 0.6f;
  EXPECT_EQ(drawn_set(p, logits), (std::set<int32_t>{1}));
}

TEST(Sampler, MinPKeepsTokensAboveFractionOfMax) {
  const auto logits = log_probs({0.05, 0.5, 0.15, 0.3});
  SamplingParams p = plain(1000.f);
  p.min_p = 0.2f;  // threshold .1: keeps .5 .3 .15
  EXPECT_EQ(drawn_set(p, logits), (std::set<int32_t>{1, 3, 2}));
  p.min_p = 0.5f;  // threshold .25
  EXPECT_EQ(drawn_set(p, logits), (std::set<int32_t>{1, 3}));
  p.min_p = 0.9f;
  EXPECT_EQ(drawn_set(p, logits), (std::set<int32_t>{1}));
}

TEST(Sampler, MinPAndTopPKeepTheSmallerSet) {
  const auto logits = log_probs({0.05, 0.5, 0.15, 0.3});
  SamplingParams p = plain(1000.f);
  p.top_p = 0.9f;  // {1, 3, 2}
  p.min_p = 0.5f;  // {1, 3}
  EXPECT_EQ(drawn_set(p, logits), (std::set<int32_t>{1, 3}));
  p.top_p = 0.7f;  // {1, 3}
  p.min_p = 0.05f; // all
  EXPECT_EQ(drawn_set(p, logits), (std::set<int32_t>{1, 3}));
}

TEST(Sampler, RepetitionPenaltyDividesPositiveMultipliesNegative) {
  SamplingParams p = plain(0.0f);
  p.repeat_penalty = 1.2f;
  const std::vector<int32_t> hist = {0};
  {
    const std::vector<float> logits = {2.0f, 1.9f, -5.f};  // 2.0 / 1.2 = 1.67 < 1.9
    Sampler s(p);
    EXPECT_EQ(s.sample(logits.data(), 3, hist), 1);
    Sampler off(plain(0.0f));
    EXPECT_EQ(off.sample(logits.data(), 3, hist), 0);
  }
  {
    const std::vector<float> logits = {-1.0f, -1.1f, -5.f};  // -1.0 * 1.2 = -1.2 < -1.1
    Sampler s(p);
    EXPECT_EQ(s.sample(logits.data(), 3, hist), 1);
  }
}

TEST(Sampler, RepetitionPenaltyOnlyOverWindowAndOncePerToken) {
  const std::vector<float> logits = {2.0f, 1.9f, -5.f};
  SamplingParams p = plain(0.0f);
  p.repeat_penalty = 1.2f;
  p.repeat_last_n = 4;
  Sampler s(p);
  EXPECT_EQ(s.sample(logits.data(), 3, std::vector<int32_t>{0, 2, 2, 2, 2}), 0);  // 0 is outside the window
  EXPECT_EQ(s.sample(logits.data(), 3, std::vector<int32_t>{2, 2, 2, 0}), 1);
  // Repeats are penalized once: 2.0 / 1.2 = 1.67 > 1.6, whereas twice would give 1.39 < 1.6.
  const std::vector<float> l2 = {2.0f, 1.6f, -5.f};
  EXPECT_EQ(s.sample(l2.data(), 3, std::vector<int32_t>{0, 0, 0}), 0);
  // Out-of-range history ids are ignored.
  EXPECT_EQ(s.sample(logits.data(), 3, std::vector<int32_t>{-1, 7}), 0);
}

TEST(Sampler, SameSeedSameSequence) {
  const auto logits = test::random_floats(32000, 11, 2.0f);
  auto run = [&](uint64_t seed) {
    SamplingParams p;  // defaults: top-k 40, top-p .95, min-p .05, temperature .8
    p.seed = seed;
    p.repeat_penalty = 1.1f;
    Sampler s(p);
    std::vector<int32_t> out;
    for (int i = 0; i < 64; ++i) out.push_back(s.sample(logits.data(), 32000, out));
    return out;
  };
  EXPECT_EQ(run(123), run(123));
  EXPECT_NE(run(123), run(124));
}

TEST(Sampler, EmpiricalFrequenciesMatchSoftmax) {
  const std::vector<double> probs = {0.2, 0.3, 0.5};
  const auto logits = log_probs(probs);
  constexpr int kDraws = 20000;
  for (float t : {1.0f, 2.0f}) {
    SamplingParams p = plain(t);
    p.seed = 99;
    Sampler s(p);
    std::map<int32_t, int> count;
    for (int i = 0; i < kDraws; ++i) ++count[s.sample(logits.data(), 3, {})];
    double z = 0;
    for (double q : probs) z += std::pow(q, 1.0 / t);
    for (int id = 0; id < 3; ++id) {
      const double expect = std::pow(probs[size_t(id)], 1.0 / t) / z;
      // std of a frequency is sqrt(p(1-p)/n) <= 0.0036; 0.015 is > 4 sigma.
      EXPECT_NEAR(double(count[id]) / kDraws, expect, 0.015) << "token " << id << " T=" << t;
    }
  }
}

TEST(Sampler, NanAndNegativeInfinityAreIgnored) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> logits = {nan, 1.0f, -inf, 0.5f, nan};
  Sampler g(plain(0.0f));
  EXPECT_EQ(g.sample(logits.data(), 5, {}), 1);
  EXPECT_EQ(drawn_set(plain(1000.f), logits), (std::set<int32_t>{1, 3}));
}

TEST(Sampler, PositiveInfinityIsUniformOverInfiniteTokens) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> logits = {0.f, inf, 100.f, inf};
  Sampler g(plain(0.0f));
  EXPECT_EQ(g.sample(logits.data(), 4, {}), 1);
  EXPECT_EQ(drawn_set(plain(1.0f), logits, 200), (std::set<int32_t>{1, 3}));
}

TEST(Sampler, NoUsableLogitThrows) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> logits = {nan, -std::numeric_limits<float>::infinity()};
  Sampler s(plain(1.0f));
  EXPECT_THROW(s.sample(logits.data(), 2, {}), Error);
  EXPECT_THROW(s.sample(logits.data(), 0, {}), Error);
}

TEST(Sampler, LargeVocabDefaultChainStaysInTopK) {
  constexpr int32_t n = 256000;
  const auto logits = test::random_floats(n, 5, 3.0f);
  std::vector<float> sorted = logits;
  std::nth_element(sorted.begin(), sorted.begin() + 39, sorted.end(), std::greater<float>());
  const float kth = sorted[39];
  Sampler s(SamplingParams{});
  std::vector<int32_t> hist;
  for (int i = 0; i < 50; ++i) {
    const int32_t id = s.sample(logits.data(), n, hist);
    ASSERT_GE(logits[size_t(id)], kth);
    hist.push_back(id);
  }
}

}  // namespace
}  // namespace polykv
