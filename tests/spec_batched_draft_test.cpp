// The draft model drafting for several sequences at once (DraftModelDrafter::draft_many, the engine's
// step): each sequence gets the drafts, and its draft KV the state, that its own draft() calls give;
// the forward passes are one per draft position for all sequences; and concurrent engine requests
// drafting with the shipped draft model (models/polykv-draft-q8_0.gguf) give the tokens of plain
// greedy decoding, with far fewer draft-model forward passes than drafted tokens.
#include <gtest/gtest.h>

#include "core/error.h"
#include "embedded_model_fixture.h"
#include "engine/engine.h"
#include "engine/generate.h"
#include "engine/spec/draft_model_drafter.h"
#include "engine_test_util.h"
#include "kv/kv_cache.h"

namespace polykv {
namespace {

struct Fixture : test::EmbeddedModelFixture {
  std::unique_ptr<Model> draft =
      Model::load(std::string(POLYKV_SOURCE_DIR) + "/models/polykv-draft-q8_0.gguf", backend);
};

Fixture& fx() {
  static Fixture f;
  return f;
}

DraftModelOptions draft_options() {
  DraftModelOptions o;
  o.max_tokens = 1024;
  o.prefill_chunk = 48;  // several catch-up rounds for the longer contexts below
  return o;
}

const char* const kTexts[] = {
    "import os\nimport sys\n\ndef main(argv):\n    parser = argparse.ArgumentParser()\n    ",
    "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, x):\n        self.",
    "# A long comment that makes this context longer than one catch-up chunk of the draft model.\n"
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    a, b = 0, 1\n    for _ in range(n):\n"
    "        a, b = b, a + b\n    return a\n\n\ndef factorial(n):\n    ",
    "x = 1\n",
};

TEST(SpecBatchedDraft, DraftManyEqualsEachSequenceDraftingAlone) {
  const int n = int(std::size(kTexts));
  std::vector<std::vector<int32_t>> ctx;
  for (const char* t : kTexts) ctx.push_back(fx().encode(t, true));
  std::vector<std::unique_ptr<DraftModelDrafter>> alone, together;
  for (int i = 0; i < n; ++i) {
    alone.push_back(std::make_unique<DraftModelDrafter>(*fx().draft, draft_options()));
    together.push_back(std::make_unique<DraftModelDrafter>(*fx().draft, draft_options()));
  }
  const int max_n[] = {3, 1, 4, 2};
  // Three rounds: drafts, then a partial acceptance (the first draft and a token of "the target"),
  // then drafts again from the rolled-back KV.
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    std::vector<std::vector<int32_t>> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
    std::vector<DraftJob> jobs;
    for (int i = 0; i < n; ++i) {
      alone[size_t(i)]->draft(ctx[size_t(i)], max_n[i], a[size_t(i)], nullptr);
      jobs.push_back({together[size_t(i)].get(), ctx[size_t(i)], max_n[i], &b[size_t(i)]});
    }
    const int n_forward = DraftModelDrafter::draft_many(jobs);
    // Catch-up rounds (the longest context in chunks of 48 on the first round, one token after) plus
    // one pass per further draft position (max of max_n, minus 1).
    const size_t longest = std::max_element(ctx.begin(), ctx.end(), [](auto& x, auto& y) { return x.size() < y.size(); })->size();
    const int catch_up = round == 0 ? int((longest + 47) / 48) : 1;
    EXPECT_EQ(n_forward, catch_up + 3);
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(b[size_t(i)], a[size_t(i)]) << "sequence " << i;
      ASSERT_EQ(int(a[size_t(i)].size()), max_n[i]);
      // Accept the first draft, then a token of the target's that differs from the second draft.
      ctx[size_t(i)].push_back(a[size_t(i)][0]);
      ctx[size_t(i)].push_back(a[size_t(i)].size() > 1 ? (a[size_t(i)][1] + 1) % 8000 : 42);
      alone[size_t(i)]->accept(ctx[size_t(i)], 1);
      together[size_t(i)]->accept(ctx[size_t(i)], 1);
    }
  }
}

TEST(SpecBatchedDraft, DraftManyRefusesDraftersOfDifferentModels) {
  DraftModelDrafter a(*fx().draft, draft_options()), b(*fx().model, draft_options());
  const std::vector<int32_t> ctx = fx().encode("def f(x):\n    return", true);
  std::vector<int32_t> oa, ob;
  const DraftJob jobs[] = {{&a, ctx, 2, &oa}, {&b, ctx, 2, &ob}};
  EXPECT_THROW(DraftModelDrafter::draft_many(jobs), Error);
  const DraftJob twice[] = {{&a, ctx, 2, &oa}, {&a, ctx, 2, &ob}};
  EXPECT_THROW(DraftModelDrafter::draft_many(twice), Error);
}

std::vector<int32_t> plain_greedy(const std::vector<int32_t>& prompt, int n) { return fx().plain_greedy(prompt, n); }

TEST(SpecBatchedDraft, ConcurrentDraftModelRequestsGiveThePlainGreedyTokens) {
  EngineOptions o;
  o.parallel = 8;
  o.kv_tokens = 8192;
  o.block_tokens = 32;
  o.model_id = "embedded";
  o.check_invariants = true;
  o.draft_model = fx().draft.get();
  Engine engine(*fx().model, fx().eog(), o);
  const int n_gen = 40;
  std::vector<std::unique_ptr<test::Collector>> cs;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 8; ++i) {
    prompts.push_back(fx().encode(std::string(kTexts[i % 4]) + "# request " + std::to_string(i) + "\n", true));
    cs.push_back(std::make_unique<test::Collector>());
    GenerationRequest r = cs.back()->request(prompts.back(), n_gen, "", /*ignore_eos=*/true);
    r.spec = "draft";
    r.spec_n_max = 1 + i % 4;
    // Fixed n-max: every step drafts (the adaptive policy may draft nothing in a batch of 8 on a CPU,
    // 2026-12-02, and this test is about drafting in batches).
    r.spec_policy = "fixed";
    engine.submit(std::move(r));
  }
  for (auto& c : cs) c->wait();
  for (size_t i = 0; i < cs.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(cs[i]->info.reason, FinishReason::Length) << cs[i]->info.error;
    EXPECT_EQ(cs[i]->ids, plain_greedy(prompts[i], n_gen));
  }
  const ServiceMetrics m = engine.metrics();
  EXPECT_GT(m.spec_accepted_tokens_total, 0);
  // Drafting one sequence at a time costs one forward per drafted token (the catch-up and the chained
  // drafts); together, the 8 sequences share them.
  EXPECT_GT(m.spec_draft_forwards_total, 0);
  EXPECT_LT(2 * m.spec_draft_forwards_total, m.spec_drafted_tokens_total)
      << m.spec_draft_forwards_total << " draft forwards for " << m.spec_drafted_tokens_total << " drafts";
  EXPECT_EQ(m.kv_blocks_used, 0);
}

}  // namespace
}  // namespace polykv
