// The sampler's greedy fast path (temperature 0, no penalty: one argmax pass) against its general path
// (forced by a penalty that touches nothing: a history of an out-of-range id), on vectors with ties,
// NaN, +inf and -inf, and the same error when no logit is finite.
#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <vector>

#include "core/error.h"
#include "engine/sampler.h"

namespace polykv {
namespace {

SamplingParams greedy(bool general) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.repeat_penalty = general ? 1.5f : 1.0f;  // the penalty applies to the history below: an id out of range
  return p;
}

TEST(SamplerGreedy, FastPathPicksWhatTheGeneralPathPicks) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::mt19937 rng(7);
  const std::vector<int32_t> none = {-3};  // skipped by the penalty (out of range), but makes it "active"
  for (int trial = 0; trial < 400; ++trial) {
    const int n = 1 + int(rng() % 300);
    std::vector<float> l(static_cast<size_t>(n));
    for (float& x : l) {
      const uint32_t r = rng() % 100;
      x = r < 5 ? nan : r < 8 ? -inf : r < 9 && trial % 3 == 0 ? inf : float(int(rng() % 7)) * 0.5f - 1.0f;  // ties
    }
    Sampler fast(greedy(false)), general(greedy(true));
    bool fast_threw = false, general_threw = false;
    int32_t a = -1, b = -1;
    try {
      a = fast.sample(l.data(), n, none);
    } catch (const Error&) {
      fast_threw = true;
    }
    try {
      b = general.sample(l.data(), n, none);
    } catch (const Error&) {
      general_threw = true;
    }
    ASSERT_EQ(fast_threw, general_threw) << "trial " << trial;
    ASSERT_EQ(a, b) << "trial " << trial << " n " << n;
  }
}

TEST(SamplerGreedy, NoFiniteLogitIsAnError) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> l = {nan, -inf, nan};
  Sampler s(greedy(false));
  EXPECT_THROW(s.sample(l.data(), 3, {}), Error);
  const std::vector<float> m = {nan, -inf, 2.0f, inf, inf};
  EXPECT_EQ(s.sample(m.data(), 5, {}), 3);  // the first +inf
}

}  // namespace
}  // namespace polykv
