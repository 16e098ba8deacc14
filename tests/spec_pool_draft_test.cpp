// Agents on one pool drafting with a draft model (issue #10, 2026-12-01d): the pool's tokens are fed to
// the draft model once (a shared draft KV per pool) and copied into each agent's draft KV, instead of
// being prefilled into every agent's own draft KV. A drafter filled by the copy drafts exactly what
// one that prefilled the context itself drafts, and 8 agents stay lossless.
#include <gtest/gtest.h>

#include "embedded_model_fixture.h"
#include "engine/engine.h"
#include "engine/spec/draft_model_drafter.h"
#include "engine_test_util.h"

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

const char* kDoc =
    "import os\nimport sys\n\nclass Config:\n    def __init__(self, prefix='APP_'):\n        self.prefix = prefix\n"
    "        self.values = {}\n        for key, value in os.environ.items():\n            if key.startswith(prefix):\n"
    "                self.values[key[len(prefix):].lower()] = value\n\n    def get(self, name, default=None):\n"
    "        return self.values.get(name, default)\n\n";

DraftModelOptions options() {
  DraftModelOptions o;
  o.max_tokens = 1024;
  o.prefill_chunk = 40;  // the pool (~90 tokens) takes several chunks; the copy is chunk-independent
  return o;
}

TEST(SpecPoolDraft, ACopiedPrefixDraftsAsAnOwnPrefill) {
  const std::vector<int32_t> pool = fx().encode(kDoc, true);
  DraftModelDrafter shared(*fx().draft, options());
  shared.extend(pool);
  ASSERT_EQ(shared.cached_tokens().size(), pool.size());
  for (const char* suffix : {"\n    def keys(self):\n        return ", "\nconfig = Config()\nprint(config."}) {
    SCOPED_TRACE(suffix);
    std::vector<int32_t> ctx = pool;
    const std::vector<int32_t> s = fx().encode(suffix, false);
    ctx.insert(ctx.end(), s.begin(), s.end());
    DraftModelDrafter own(*fx().draft, options()), copied(*fx().draft, options());
    EXPECT_EQ(copied.copy_prefix_from(shared, ctx, ctx.size() - 1), int(pool.size()));
    EXPECT_EQ(copied.copy_prefix_from(shared, ctx, ctx.size() - 1), 0);  // only into an empty KV
    for (int round = 0; round < 4; ++round) {  // drafts, accept the first two plus a token, again
      std::vector<int32_t> a, b;
      own.draft(ctx, 4, a, nullptr);
      copied.draft(ctx, 4, b, nullptr);
      ASSERT_EQ(a, b) << round;
      ASSERT_EQ(a.size(), 4u);
      // The first draft fed only the suffix; its catch-up counts the copy too (not steady drafting).
      if (round == 0) EXPECT_EQ(copied.last_catch_up(), int(pool.size() + s.size()));
      if (round == 1) EXPECT_EQ(copied.last_catch_up(), own.last_catch_up());
      ctx.insert(ctx.end(), a.begin(), a.begin() + 2);
      ctx.push_back((a[2] + 1) % fx().model->config().n_vocab);
      own.accept(ctx, 2);
      copied.accept(ctx, 2);
    }
  }
  // A context that leaves the pool early copies only the common prefix.
  std::vector<int32_t> other(pool.begin(), pool.begin() + 10);
  other.push_back((pool[10] + 1) % fx().model->config().n_vocab);
  DraftModelDrafter part(*fx().draft, options());
  EXPECT_EQ(part.copy_prefix_from(shared, other, other.size() - 1), 10);
}

TEST(SpecPoolDraft, AgentsOnAPoolShareItsDraftPrefillAndStayLossless) {
  EngineOptions o;
  o.parallel = 8;
  o.kv_tokens = 8192;
  o.block_tokens = 32;
  o.model_id = "embedded";
  o.check_invariants = true;
  o.draft_model = fx().draft.get();
  Engine engine(*fx().model, fx().eog(), o);
  const std::vector<int32_t> doc = fx().encode(kDoc, true);
  engine.create_pool("doc", doc, "", "");
  const int n_gen = 24, n_agents = 8;
  std::vector<std::unique_ptr<test::Collector>> cs;
  std::vector<std::vector<int32_t>> full;
  for (int a = 0; a < n_agents; ++a) {
    const auto prompt = fx().encode("\n    def method_" + std::to_string(a) + "(self):\n        return self.", false);
    cs.push_back(std::make_unique<test::Collector>());
    GenerationRequest r = cs.back()->request(prompt, n_gen, "doc", /*ignore_eos=*/true);
    r.spec = "draft";
    r.spec_n_max = 3;
    r.spec_policy = "fixed";  // every agent drafts from its first step
    engine.submit(std::move(r));
    std::vector<int32_t> f = doc;
    f.insert(f.end(), prompt.begin(), prompt.end());
    full.push_back(std::move(f));
  }
  for (auto& c : cs) c->wait();
  for (int a = 0; a < n_agents; ++a) {
    SCOPED_TRACE(a);
    EXPECT_EQ(cs[size_t(a)]->info.reason, FinishReason::Length) << cs[size_t(a)]->info.error;
    EXPECT_EQ(cs[size_t(a)]->ids, fx().plain_greedy(full[size_t(a)], n_gen));
  }
  const ServiceMetrics m = engine.metrics();
  // Every agent's draft KV got the pool's tokens by copy (all of them: each agent's context starts with the pool).
  EXPECT_EQ(m.spec_draft_shared_tokens_total, int64_t(n_agents) * int64_t(doc.size()));
  EXPECT_GT(m.spec_accepted_tokens_total, 0);
  // A second wave reuses the same shared draft KV (no new prefill needed; the copy still counts).
  test::Collector c;
  GenerationRequest r = c.request(fx().encode("\n    def size(self):\n        return ", false), 8, "doc", true);
  r.spec = "draft";
  r.spec_policy = "fixed";
  engine.submit(std::move(r));
  c.wait();
  EXPECT_EQ(engine.metrics().spec_draft_shared_tokens_total, int64_t(n_agents + 1) * int64_t(doc.size()));
}

}  // namespace
}  // namespace polykv
