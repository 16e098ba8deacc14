// MTP drafting past a filled context (issue #10): `bench --spec mtp -d DEPTH` hands the depth fill's
// hidden states to the drafter (without them it had a gap at the context and drafted nothing), and
// the head's catch-up computes the logits of its last row only (MtpHead::forward last_row_only).
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "model/mtp_head.h"
#include "test_util.h"

namespace polykv {
namespace {

const std::string kHead = std::string(POLYKV_SOURCE_DIR) + "/models/polykv-code-26m-mtp-head-q8_0.gguf";

TEST(MtpDepth, BenchAtDepthDraftsAndStaysLossless) {
  // Python source from the tree as the text: 600 tokens of depth, a 32-token prompt, 24 generated.
  const std::string text = std::string(POLYKV_SOURCE_DIR) + "/tools/train_draft.py";
  const auto r = test::polykv_streams("bench -m '" + test::embedded_model() + "' --spec mtp --model-mtp '" + kHead +
                                      "' --spec-n-max 3 --text '" + text + "' -d 600 -p 32 -n 24 -r 1 -t 2 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["lossless"].get<bool>());
  EXPECT_GT(j["drafted"].get<int64_t>(), 0) << "the MTP drafter drafted nothing after the depth fill";
  EXPECT_GT(j["accepted"].get<int64_t>(), 0);
}

TEST(MtpDepth, LastRowOnlyGivesTheLastRowsBitsAndWritesOneRow) {
  CpuBackend backend(2);
  auto model = Model::load(test::embedded_model(), backend);
  auto head = MtpHead::load(*model, kHead);
  const int E = model->config().n_embd, V = model->config().n_vocab, n = 7;
  const std::vector<float> hidden = test::random_floats(size_t(n) * E, 5);
  std::vector<int32_t> next(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) next[size_t(i)] = 50 + 91 * i;
  KvCache kv1(head->kv_shape(), KvType::F16, KvType::F16, 32), kv2(head->kv_shape(), KvType::F16, KvType::F16, 32);
  std::vector<float> l1(size_t(n) * V), y1(size_t(n) * E);
  head->forward(next, hidden.data(), kv1, l1.data(), y1.data());
  constexpr float kGuard = -12345.0f;
  std::vector<float> l2(size_t(V) + 64, kGuard), y2(size_t(E) + 64, kGuard);  // one row + a guard
  head->forward(next, hidden.data(), kv2, l2.data(), y2.data(), /*last_row_only=*/true);
  EXPECT_EQ(0, std::memcmp(l2.data(), l1.data() + size_t(n - 1) * V, size_t(V) * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(y2.data(), y1.data() + size_t(n - 1) * E, size_t(E) * sizeof(float)));
  for (size_t i = size_t(V); i < l2.size(); ++i) ASSERT_EQ(l2[i], kGuard) << "logits written past one row";
  for (size_t i = size_t(E); i < y2.size(); ++i) ASSERT_EQ(y2[i], kGuard) << "hidden written past one row";
  // The KV rows are the same either way: one more row after each gives the same bits.
  std::vector<float> a(static_cast<size_t>(V)), b(static_cast<size_t>(V));
  const int32_t id = 77;
  head->forward(std::span(&id, 1), hidden.data(), kv1, a.data(), nullptr);
  head->forward(std::span(&id, 1), hidden.data(), kv2, b.data(), nullptr);
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace polykv
