// MtpDrafter (engine/spec/mtp_drafter.h) driven through the Drafter contract as the speculative loop
// drives it (prefill, then draft / verify / target_hidden / accept with 0..k accepted drafts): after
// every rollback its drafts equal those of a fresh head run over the whole context, i.e. its KV holds
// exactly the rows the accepted tokens leave valid.
#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "engine/spec/mtp_drafter.h"
#include "kv/kv_cache.h"
#include "kv/owned_paged_kv.h"
#include "model/model.h"
#include "model/mtp_head.h"
#include "mtp_test_model.h"
#include "test_util.h"

namespace polykv {
namespace {

int32_t argmax(const float* v, int n) { return int32_t(std::max_element(v, v + n) - v); }

// Greedy chained drafts from scratch: the target's hidden states of context[0 .. L-2], the head over
// rows 0 .. L-2, then k - 1 chained steps.
std::vector<int32_t> fresh_drafts(Model& m, const std::vector<int32_t>& ctx, int k) {
  const int E = m.config().n_embd, V = m.config().n_vocab, n = int(ctx.size()) - 1;
  std::vector<float> hidden(size_t(n) * E);
  KvCache tkv(m.kv_shape(), KvType::F16, KvType::F16, 512);
  const Model::BatchSeq s{std::span(ctx).first(size_t(n)), &tkv, nullptr, false, hidden.data()};
  m.forward_batch(std::span(&s, 1));
  auto head = MtpHead::load(m);
  OwnedPagedKv kv(head->kv_shape(), KvType::F16, KvType::F16, 512);
  std::vector<float> logits(size_t(n) * V), y(size_t(n) * E);
  head->forward(std::span(ctx).subspan(1), hidden.data(), kv, logits.data(), y.data());
  std::vector<int32_t> out{argmax(logits.data() + size_t(n - 1) * V, V)};
  std::vector<float> h(y.end() - E, y.end());
  while (int(out.size()) < k) {
    head->forward(std::span(&out.back(), 1), h.data(), kv, logits.data(), y.data());
    out.push_back(argmax(logits.data(), V));
    std::copy(y.begin(), y.begin() + E, h.begin());
  }
  return out;
}

TEST(MtpDrafter, NeedsNextnLayers) {
  CpuBackend backend(2);
  auto model = Model::load(test::embedded_model(), backend);
  try {
    make_mtp_drafter(*model, 64);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("this model has no MTP (nextn) layers"), std::string::npos) << e.what();
  }
}

// Params: the prefill protocol (false: the whole prompt, then the target's first token (context =
// prompt + 1); true: all but the last prompt token, which the first verify step feeds
// (engine/generate.cpp)), and whether the loop calls prefill() (the head catches up on the prompt's
// rows there, all but the last, instead of in the first draft).
class MtpDrafterRounds : public testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(MtpDrafterRounds, DraftsEqualAFreshHeadAfterEveryRollback) {
  const auto [all_but_last, call_prefill] = GetParam();
  CpuBackend backend(2);
  auto model = Model::load(test::mtp_test_model(), backend);
  const int E = model->config().n_embd, V = model->config().n_vocab, k = 4;
  auto drafter = make_mtp_drafter(*model, 256);
  EXPECT_EQ(drafter->name(), "mtp");
  ASSERT_TRUE(drafter->needs_target_hidden());

  OwnedPagedKv tkv(model->kv_shape(), KvType::F16, KvType::F16, 256, 16);
  std::vector<int32_t> ctx;
  for (int i = 0; i < 17; ++i) ctx.push_back(int32_t(20 + (i * 613) % 7000));
  std::vector<float> hidden(ctx.size() * E), logits(ctx.size() * size_t(V));
  {  // prefill: the prompt's hidden states (then the first token)
    const size_t n = ctx.size() - (all_but_last ? 1 : 0);
    const Model::BatchSeq s{std::span(ctx).first(n), &tkv, logits.data(), false, hidden.data()};
    model->forward_batch(std::span(&s, 1));
    drafter->target_hidden(hidden.data(), int(n), 0);
    if (!all_but_last) ctx.push_back(argmax(logits.data(), V));
  }
  if (call_prefill) {  // rows 0 .. L-3 run now; row L-2 waits for the first draft
    drafter->prefill(ctx);
    EXPECT_EQ(static_cast<MtpDrafter&>(*drafter).kv().n_tokens(), int(ctx.size()) - 2);
  }
  const int plan[] = {0, 2, 4, 1, 3, 0, 4, 2};  // drafts accepted per round
  for (int n_acc : plan) {
    std::vector<int32_t> d;
    drafter->draft(ctx, k, d, nullptr);
    ASSERT_EQ(int(d.size()), k);
    EXPECT_EQ(d, fresh_drafts(*model, ctx, k)) << "at context length " << ctx.size();
    // Verify [last, drafts] (positions pos0 ...); accept n_acc drafts whatever the target says, then the
    // target's token after the last accepted row.
    const int pos0 = tkv.n_tokens();
    ASSERT_EQ(pos0, int(ctx.size()) - 1);
    std::vector<int32_t> v{ctx.back()};
    v.insert(v.end(), d.begin(), d.end());
    hidden.resize(v.size() * E);
    logits.resize(v.size() * size_t(V));
    const Model::BatchSeq s{v, &tkv, logits.data(), true, hidden.data()};
    model->forward_batch(std::span(&s, 1));
    ctx.insert(ctx.end(), d.begin(), d.begin() + n_acc);
    ctx.push_back(argmax(logits.data() + size_t(n_acc) * V, V));
    tkv.truncate(pos0 + n_acc + 1);
    drafter->target_hidden(hidden.data(), int(v.size()), pos0);
    drafter->accept(ctx, n_acc);
  }
  std::vector<int32_t> d;
  drafter->draft(ctx, 1, d, nullptr);
  EXPECT_EQ(d, fresh_drafts(*model, ctx, 1));
}

INSTANTIATE_TEST_SUITE_P(Prefill, MtpDrafterRounds, testing::Combine(testing::Bool(), testing::Bool()));

TEST(MtpDrafter, NoHiddenStatesNoDrafts) {
  CpuBackend backend(2);
  auto model = Model::load(test::mtp_test_model(), backend);
  auto drafter = make_mtp_drafter(*model, 64);
  std::vector<int32_t> ctx{1, 2, 3, 4}, d;
  drafter->draft(ctx, 4, d, nullptr);  // target_hidden never called: nothing to draft from
  EXPECT_TRUE(d.empty());
}

}  // namespace
}  // namespace polykv
