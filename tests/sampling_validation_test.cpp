// Sampling parameters: validate() accepts exactly the documented ranges (engine/sampler.h) and names
// the parameter it rejects; the Sampler refuses invalid parameters instead of drawing garbage; and
// the sampler's own robustness fixes (a penalty that overflows a logit to +inf).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>

#include "core/error.h"
#include "engine/sampler.h"

namespace polykv {
namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// The message of validate(p), or "" when it accepts p.
std::string rejection(const SamplingParams& p) {
  try {
    validate(p);
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

template <typename F>
SamplingParams with(F set) {
  SamplingParams p;
  set(p);
  return p;
}

TEST(SamplingValidation, AcceptsTheDocumentedRanges) {
  EXPECT_EQ(rejection(SamplingParams{}), "");
  EXPECT_EQ(rejection(with([](auto& p) { p.temperature = 0; })), "");
  EXPECT_EQ(rejection(with([](auto& p) { p.temperature = 1e6f; })), "");
  EXPECT_EQ(rejection(with([](auto& p) { p.top_k = 0; })), "");
  EXPECT_EQ(rejection(with([](auto& p) { p.top_p = 0; })), "");
  EXPECT_EQ(rejection(with([](auto& p) { p.top_p = 1; })), "");
  EXPECT_EQ(rejection(with([](auto& p) { p.min_p = 0; })), "");
  EXPECT_EQ(rejection(with([](auto& p) { p.min_p = 1; })), "");
  EXPECT_EQ(rejection(with([](auto& p) { p.repeat_penalty = 1e-3f; })), "");
  EXPECT_EQ(rejection(with([](auto& p) { p.repeat_penalty = 0.5f; })), "");
  EXPECT_EQ(rejection(with([](auto& p) { p.repeat_last_n = -1; })), "");
  EXPECT_EQ(rejection(with([](auto& p) { p.seed = ~uint64_t(0); })), "");
}

TEST(SamplingValidation, RejectsOutOfRangeAndNonFiniteValuesByName) {
  struct Bad {
    SamplingParams p;
    const char* name;
  };
  const std::vector<Bad> bad = {
      {with([](auto& p) { p.temperature = -0.1f; }), "temperature"},
      {with([](auto& p) { p.temperature = kNan; }), "temperature"},
      {with([](auto& p) { p.temperature = kInf; }), "temperature"},
      {with([](auto& p) { p.top_k = -1; }), "top_k"},
      {with([](auto& p) { p.top_p = -0.01f; }), "top_p"},
      {with([](auto& p) { p.top_p = 1.5f; }), "top_p"},
      {with([](auto& p) { p.top_p = kNan; }), "top_p"},
      {with([](auto& p) { p.min_p = 2; }), "min_p"},
      {with([](auto& p) { p.min_p = -0.5f; }), "min_p"},
      {with([](auto& p) { p.min_p = kNan; }), "min_p"},
      {with([](auto& p) { p.repeat_penalty = 0; }), "repeat_penalty"},
      {with([](auto& p) { p.repeat_penalty = -1; }), "repeat_penalty"},
      {with([](auto& p) { p.repeat_penalty = kNan; }), "repeat_penalty"},
      {with([](auto& p) { p.repeat_penalty = kInf; }), "repeat_penalty"},
      {with([](auto& p) { p.repeat_last_n = -2; }), "repeat_last_n"},
  };
  for (const Bad& b : bad) {
    const std::string msg = rejection(b.p);
    EXPECT_EQ(msg.rfind(b.name, 0), 0u) << "expected a message about " << b.name << ", got '" << msg << "'";
  }
}

// min_p = 2 used to erase every candidate, then read the empty list (garbage ids, no error).
TEST(SamplingValidation, SamplerRefusesInvalidParameters) {
  EXPECT_THROW(Sampler(with([](auto& p) { p.min_p = 2; })), Error);
  EXPECT_THROW(Sampler(with([](auto& p) { p.repeat_penalty = 0; })), Error);
  EXPECT_THROW(Sampler(with([](auto& p) { p.temperature = kNan; })), Error);
}

// min_p = 1 keeps only the tokens as probable as the best: never an empty set.
TEST(SamplingValidation, MinPOneKeepsTheBest) {
  const std::vector<float> logits = {1.f, 4.f, 2.f, 4.f};
  SamplingParams p;
  p.min_p = 1;
  p.top_k = 0;
  p.top_p = 1;
  p.temperature = 1;
  Sampler s(p);
  std::set<int32_t> seen;
  for (int i = 0; i < 200; ++i) seen.insert(s.sample(logits.data(), 4, {}));
  EXPECT_EQ(seen, (std::set<int32_t>{1, 3}));
}

// A tiny penalty divides a large positive logit past FLT_MAX: that token is then +inf and, as for
// any +inf logit, the only one drawn. It used to be missed (m = inf, NaN weights, id 0 returned).
TEST(SamplingValidation, PenaltyOverflowToInfinityIsHandled) {
  const std::vector<float> logits = {0.f, 100.f, 50.f};
  const std::vector<int32_t> history = {1};
  SamplingParams p;
  p.top_k = 0;
  p.top_p = 1;
  p.min_p = 0;
  p.temperature = 1;
  p.repeat_penalty = 1e-38f;
  Sampler s(p);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(s.sample(logits.data(), 3, history), 1);
}

TEST(SamplingValidation, RandomSeedsFitJsonNumbers) {
  std::set<uint64_t> seeds;
  for (int i = 0; i < 8; ++i) {
    const uint64_t s = random_seed();
    EXPECT_LT(s, uint64_t(1) << 53);
    seeds.insert(s);
  }
  EXPECT_GT(seeds.size(), 1u);
}

}  // namespace
}  // namespace polykv
