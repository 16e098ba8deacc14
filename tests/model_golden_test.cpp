// Golden tests: polykv's logits against Hugging Face transformers' (float32) for every fixture
// architecture and the trained model, over the full sequence in one pass and as prompt (40) then
// single-token decode steps (8).
//
// Tolerance: the fixture weights are f16 values held exactly, polykv does f32 math; the fixtures'
// README measured that leaving out any one architectural feature moves logits by 0.08 to 9.8, while
// f32 reorderings move them by ~1e-5. We require top-1 identical at every position and
// max |Δ log-softmax| <= 1e-3 (measured: 7e-6 to 3e-5), which separates right from wrong by more than an order of magnitude.
// That is with an f32 KV cache. With compressed KV the logits move by the cache's rounding:
//  - f16/f16: top-1 identical at every position and max |Δ log-softmax| <= 2e-2 (f16 rounds K/V
//    to 11 significant bits, ~5e-4 relative; measured below in the test output);
//  - q8_0/q8_0: top-1 agrees with transformers at >= 90% of the positions (measured 46-48/48);
//  - q8_0/turbo3 (the default) on the trained model: top-1 agrees at >= 90% (measured 47/48).
//    The random-weight fixtures are far more sensitive than a trained model (their top-2 logits
//    are close everywhere: f32 K with q4_0 V alone agrees at 37/48 on llama3_gqa), so for them the
//    default only has to agree at >= 25% (measured 16-36/48; chance is 1/8000) and the measured
//    figure is printed. Fast-vs-reference exactness of every type pair is attention_test's job.
// Blocks of 16 tokens and sliding windows of 16 (gemma) also exercise the release of old blocks.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>

#include "backend/cpu/cpu_backend.h"
#include "model/model.h"
#include "test_util.h"

namespace polykv {
namespace {

constexpr int kVocab = 8000;
constexpr int kPositions = 48;
constexpr int kPrompt = 40;
constexpr double kMaxLogprobDiff = 1e-3;
constexpr double kMaxLogprobDiffF16 = 2e-2;
constexpr double kMinTop1Compressed = 0.9;
constexpr double kMinTop1DefaultRandom = 0.25;

std::vector<int32_t> fixture_ids(const std::string& dir, const std::string& name) {
  // The 48 ids are the same for every fixture; read them from the ref json.
  std::ifstream in(dir + "/" + name + ".ref.json");
  std::ifstream in2(test::fixtures_dir() + "/models/random/llama3_gqa.ref.json");
  nlohmann::json j = nlohmann::json::parse(in.good() ? in : in2);
  return j["ref"]["ids"].get<std::vector<int32_t>>();
}

using test::log_softmax;

int argmax(const float* x, int n) { return int(std::max_element(x, x + n) - x); }

// How close a run must be to transformers' logits.
struct Tolerance {
  double max_logprob_diff;  // max |Δ log-softmax| over all positions and tokens (< 0: not checked)
  double min_top1_agree;    // fraction of positions whose top-1 must agree (1: all)
};

void compare(const std::string& what, const std::vector<float>& got, const std::vector<float>& ref, Tolerance tol) {
  ASSERT_EQ(got.size(), ref.size());
  double worst = 0;
  int agree = 0;
  for (int t = 0; t < kPositions; ++t) {
    const float* g = got.data() + size_t(t) * kVocab;
    const float* r = ref.data() + size_t(t) * kVocab;
    const bool same = argmax(g, kVocab) == argmax(r, kVocab);
    agree += same;
    if (tol.min_top1_agree >= 1) EXPECT_TRUE(same) << what << " top-1 differs at position " << t;
    const auto lg = log_softmax(g, kVocab), lr = log_softmax(r, kVocab);
    for (int i = 0; i < kVocab; ++i) worst = std::max(worst, std::abs(lg[size_t(i)] - lr[size_t(i)]));
  }
  if (tol.max_logprob_diff >= 0) EXPECT_LE(worst, tol.max_logprob_diff) << what;
  EXPECT_GE(agree, tol.min_top1_agree * kPositions) << what << ": top-1 agrees at " << agree << "/" << kPositions;
  std::printf("  %-48s max |dlogprob| = %.2e, top-1 %d/%d\n", what.c_str(), worst, agree, kPositions);
}

void run_golden(const std::string& dir, const std::string& name, const std::string& gguf,
                KvType kt = KvType::F32, KvType vt = KvType::F32, Tolerance tol = {kMaxLogprobDiff, 1.0}) {
  CpuBackend backend(2);
  auto model = Model::load(dir + "/" + gguf, backend);
  const auto ids = fixture_ids(dir, name);
  ASSERT_EQ(int(ids.size()), kPositions);

  std::vector<float> full(size_t(kPositions) * kVocab);
  {
    KvCache kv(model->kv_shape(), kt, vt, 64, 16);
    model->forward(ids, kv, full.data(), true);
  }
  const std::string types = std::string(" ") + kv_type_name(kt) + "/" + kv_type_name(vt);
  compare(name + types + " full", full, test::read_f32(dir + "/" + name + ".logits_full.f32"), tol);

  std::vector<float> inc(size_t(kPositions) * kVocab);
  KvCache kv(model->kv_shape(), kt, vt, 64, 16);
  model->forward(std::span(ids).first(kPrompt), kv, inc.data(), true);
  for (int t = kPrompt; t < kPositions; ++t)
    model->forward(std::span(ids).subspan(size_t(t), 1), kv, inc.data() + size_t(t) * kVocab, false);
  compare(name + types + " prompt+decode", inc, test::read_f32(dir + "/" + name + ".logits_kvcache.f32"), tol);
}

class GoldenRandom : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenRandom, MatchesTransformers) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  run_golden(test::fixtures_dir() + "/models/random", GetParam(), GetParam() + ".gguf");
}

TEST_P(GoldenRandom, F16KvCloseToTransformers) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  run_golden(test::fixtures_dir() + "/models/random", GetParam(), GetParam() + ".gguf", KvType::F16, KvType::F16,
             {kMaxLogprobDiffF16, 1.0});
}

TEST_P(GoldenRandom, Q8KvTop1AgreesWithTransformers) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  run_golden(test::fixtures_dir() + "/models/random", GetParam(), GetParam() + ".gguf", KvType::Q8_0, KvType::Q8_0,
             {-1, kMinTop1Compressed});
}

TEST_P(GoldenRandom, DefaultKvTop1) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  run_golden(test::fixtures_dir() + "/models/random", GetParam(), GetParam() + ".gguf", KvType::Q8_0, KvType::Turbo3,
             {-1, kMinTop1DefaultRandom});
}

INSTANTIATE_TEST_SUITE_P(Model, GoldenRandom,
                         ::testing::Values("llama3_gqa", "qwen2", "qwen3", "gemma2", "gemma3"));

TEST(ModelGolden, TrainedLlamaMatchesTransformers) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  run_golden(test::fixtures_dir() + "/models/trained", "trained_llama", "trained_llama.gguf");
}

TEST(ModelGolden, TrainedLlamaF16Kv) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  run_golden(test::fixtures_dir() + "/models/trained", "trained_llama", "trained_llama.gguf", KvType::F16,
             KvType::F16, {kMaxLogprobDiffF16, 1.0});
}

TEST(ModelGolden, TrainedLlamaDefaultKv) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  run_golden(test::fixtures_dir() + "/models/trained", "trained_llama", "trained_llama.gguf", KvType::Q8_0,
             KvType::Turbo3, {-1, kMinTop1Compressed});
}

}  // namespace
}  // namespace polykv
