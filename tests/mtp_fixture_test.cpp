// The MTP head of the qwen35 / qwen35moe fixtures against their `mtp_ref` (../shared/fixtures/README.md,
// "nextn / MTP"): row t = (final hidden state h_t, token ids[t+1]) at position t, causal over rows,
// predicts ids[t+2]; top-1 per row, the top-8 logits and the logsumexp. Runs once polykv loads the
// architecture (the Gated DeltaNet hybrid, issue #11); skipped with the reason until then.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "model/mtp_head.h"
#include "test_util.h"

namespace polykv {
namespace {

class MtpFixture : public testing::TestWithParam<const char*> {};

TEST_P(MtpFixture, MatchesMtpRef) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  const std::string base = test::fixtures_dir() + "/models/random/" + GetParam();
  CpuBackend backend(2);
  std::unique_ptr<Model> model;
  try {
    model = Model::load(base + ".gguf", backend);
  } catch (const Error& e) {
    GTEST_SKIP() << "polykv cannot load this architecture yet (" << e.what() << ")";
  }
  auto head = MtpHead::load(*model);
  ASSERT_NE(head, nullptr) << "the fixture has a nextn block";
  std::ifstream in(base + ".ref.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  const auto ids = j["ref"]["ids"].get<std::vector<int32_t>>();
  const auto& ref = j["mtp_ref"];
  const int rows = ref["rows"].get<int>(), E = model->config().n_embd, V = model->config().n_vocab;
  ASSERT_EQ(rows, int(ids.size()) - 1);

  std::vector<float> hidden(size_t(rows) * E);
  KvCache tkv(model->kv_shape(), KvType::F32, KvType::F32, 64);
  const Model::BatchSeq s{std::span(ids).first(size_t(rows)), &tkv, nullptr, false, hidden.data()};
  model->forward_batch(std::span(&s, 1));
  KvCache kv(head->kv_shape(), KvType::F32, KvType::F32, 64);
  std::vector<float> logits(size_t(rows) * V);
  head->forward(std::span(ids).subspan(1, size_t(rows)), hidden.data(), kv, logits.data(), nullptr);

  const auto argmax = ref["argmax"].get<std::vector<int>>();
  const auto top_ids = ref["topk_ids"].get<std::vector<std::vector<int>>>();
  const auto top_logits = ref["topk_logits"].get<std::vector<std::vector<double>>>();
  const auto lse = ref["logsumexp"].get<std::vector<double>>();
  double max_diff = 0;
  int top1 = 0;
  for (int t = 0; t < rows; ++t) {
    const float* l = logits.data() + size_t(t) * V;
    top1 += int(std::max_element(l, l + V) - l) == argmax[size_t(t)];
    for (size_t i = 0; i < top_ids[size_t(t)].size(); ++i)
      max_diff = std::max(max_diff, std::fabs(l[top_ids[size_t(t)][i]] - top_logits[size_t(t)][i]));
    const float mx = *std::max_element(l, l + V);
    double z = 0;
    for (int i = 0; i < V; ++i) z += std::exp(double(l[i]) - mx);
    max_diff = std::max(max_diff, std::fabs(mx + std::log(z) - lse[size_t(t)]));
  }
  EXPECT_EQ(top1, rows) << "rows whose top-1 matches mtp_ref";
  EXPECT_LT(max_diff, 2e-3) << "max |logit - mtp_ref| over the top-8 and the logsumexp";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MtpFixture, testing::Values("qwen35", "qwen35moe"));

}  // namespace
}  // namespace polykv
