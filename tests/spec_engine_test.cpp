// Speculative decoding in the engine (engine/engine.h): concurrent requests with the n-gram drafter
// or a draft model give the tokens of plain greedy decoding, alone and on a shared pool (prefix
// sharing, copy-on-write of the pool's partial block), under preemption and cancellation, with the
// block pool's invariants checked after every step (EngineOptions::check_invariants).
#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "engine/engine.h"
#include "engine/generate.h"
#include "engine_test_util.h"
#include "embedded_model_fixture.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace polykv {
namespace {

struct Fixture : test::EmbeddedModelFixture {
  std::unique_ptr<Model> draft = Model::load(test::embedded_model(), backend);  // drafts for itself: all accepted
};

Fixture& fx() {
  static Fixture f;
  return f;
}

std::vector<int32_t> alone(const std::vector<int32_t>& prompt, int n) { return fx().plain_greedy(prompt, n, fx().eog()); }

EngineOptions options() {
  EngineOptions o;
  o.parallel = 16;
  o.kv_tokens = 16384;
  o.block_tokens = 32;
  o.model_id = "embedded";
  o.check_invariants = true;
  o.draft_model = fx().draft.get();
  o.spec.policy = "fixed";  // n-max drafts every step (the adaptive policy: spec_adaptive_engine_test.cpp)
  return o;
}

const char* kCode =
    "import os\nimport sys\n\nclass Config:\n    def __init__(self, prefix='APP_'):\n        self.prefix = prefix\n"
    "        self.values = {}\n        for key, value in os.environ.items():\n            if key.startswith(prefix):\n"
    "                self.values[key[len(prefix):].lower()] = value\n\n    def get(self, name, default=None):\n"
    "        return self.values.get(name, default)\n\n";

using test::Collector;

GenerationRequest spec_request(Collector& c, std::vector<int32_t> prompt, int n, const std::string& spec, int k,
                               const std::string& pool = "") {
  GenerationRequest r = c.request(std::move(prompt), n, pool);
  r.spec = spec;
  r.spec_n_max = k;
  return r;
}

TEST(SpecEngine, ConcurrentRequestsGiveThePlainGreedyTokens) {
  Engine engine(*fx().model, fx().eog(), options());
  const char* specs[] = {"ngram", "draft", "none", "ngram+draft"};
  std::vector<std::unique_ptr<Collector>> cs;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 12; ++i) {
    prompts.push_back(fx().encode(std::string(kCode) + "# part " + std::to_string(i) + "\nclass ", true));
    cs.push_back(std::make_unique<Collector>());
    engine.submit(spec_request(*cs.back(), prompts.back(), 24, specs[i % 4], 1 + i % 3));
  }
  for (auto& c : cs) c->wait();
  for (size_t i = 0; i < cs.size(); ++i) {
    SCOPED_TRACE(specs[i % 4]);
    EXPECT_EQ(cs[i]->info.reason, FinishReason::Length) << cs[i]->info.error;
    EXPECT_EQ(cs[i]->ids, alone(prompts[i], 24));
  }
  const ServiceMetrics m = engine.metrics();
  EXPECT_GT(m.spec_accepted_tokens_total, 0);
  EXPECT_LE(m.spec_accepted_tokens_total, m.spec_drafted_tokens_total);
  EXPECT_GT(m.spec_steps_total, 0);
  EXPECT_EQ(m.kv_blocks_used, 0);
}

TEST(SpecEngine, AgentsOnASharedPoolGiveThePlainGreedyTokens) {
  EngineOptions o = options();
  o.spec.kind = "ngram";  // the server's default for requests that do not choose
  o.spec.n_max = 3;
  Engine engine(*fx().model, fx().eog(), o);
  const std::vector<int32_t> doc = fx().encode(kCode, true);
  engine.create_pool("doc", doc, "", "");
  std::vector<std::unique_ptr<Collector>> cs;
  std::vector<std::vector<int32_t>> suffixes;
  for (int a = 0; a < 8; ++a) {
    suffixes.push_back(fx().encode("\n    def method_" + std::to_string(a) + "(self):\n        return self.", false));
    cs.push_back(std::make_unique<Collector>());
    engine.submit(spec_request(*cs.back(), suffixes.back(), 20, a % 4 == 3 ? "draft" : a % 4 == 1 ? "ngram+draft" : "",
                               a % 2 ? 4 : 0, "doc"));
  }
  for (auto& c : cs) c->wait();
  for (size_t a = 0; a < cs.size(); ++a) {
    SCOPED_TRACE(a);
    std::vector<int32_t> full = doc;
    full.insert(full.end(), suffixes[a].begin(), suffixes[a].end());
    EXPECT_EQ(cs[a]->info.reason, FinishReason::Length) << cs[a]->info.error;
    EXPECT_EQ(cs[a]->info.cached_tokens, int(doc.size()));
    EXPECT_EQ(cs[a]->ids, alone(full, 20));
  }
  EXPECT_GT(engine.metrics().spec_accepted_tokens_total, 0);
  EXPECT_TRUE(engine.delete_pool("doc"));
}

// ngram+draft pool agents take the pool's draft-model prefill from the engine's shared copy (share_pool_draft),
// as plain draft agents do, instead of each prefilling the pool in its own draft model. Suffixes of rare tokens:
// the first steps find no 2-token match, so the draft model drafts (fixed policy).
TEST(SpecEngine, HybridDraftAgentsShareThePoolsDraftPrefill) {
  Engine engine(*fx().model, fx().eog(), options());
  const std::vector<int32_t> doc = fx().encode(kCode, true);
  engine.create_pool("doc", doc, "", "");
  std::vector<std::unique_ptr<Collector>> cs;
  std::vector<std::vector<int32_t>> suffixes;
  for (int a = 0; a < 2; ++a) {
    suffixes.push_back(fx().encode(a ? "\n# zqxv kjwp 7731\n" : "\n# wvqz pjkx 1377\n", false));
    cs.push_back(std::make_unique<Collector>());
    engine.submit(spec_request(*cs.back(), suffixes.back(), 16, "ngram+draft", 3, "doc"));
  }
  for (auto& c : cs) c->wait();
  for (size_t a = 0; a < cs.size(); ++a) {
    SCOPED_TRACE(a);
    std::vector<int32_t> full = doc;
    full.insert(full.end(), suffixes[a].begin(), suffixes[a].end());
    EXPECT_EQ(cs[a]->info.reason, FinishReason::Length) << cs[a]->info.error;
    EXPECT_EQ(cs[a]->ids, alone(full, 16));
  }
  const ServiceMetrics m = engine.metrics();
  EXPECT_GT(m.spec_draft_shared_tokens_total, 0) << "the agents' draft models did not take the pool's shared prefill";
  EXPECT_GT(m.spec_drafted_tokens_total, 0);
}

TEST(SpecEngine, PreemptionAndCancellationWithSpeculation) {
  EngineOptions o = options();
  o.kv_tokens = 32 * 10;  // far fewer blocks than 8 sequences of ~170 tokens need at once
  o.step_tokens = 64;
  o.spec.kind = "ngram";
  o.spec.n_max = 4;
  Engine engine(*fx().model, fx().eog(), o);
  std::vector<std::unique_ptr<Collector>> cs;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 8; ++i) {
    prompts.push_back(fx().encode("# variant " + std::to_string(i) + "\n" + std::string(kCode), true));
    cs.push_back(std::make_unique<Collector>());
    engine.submit(spec_request(*cs.back(), prompts.back(), 24, i % 2 ? "draft" : "", 0));
  }
  Collector cancelled;
  const uint64_t id = engine.submit(spec_request(cancelled, prompts[0], 200, "ngram", 4));
  engine.cancel(id);
  for (auto& c : cs) c->wait();
  cancelled.wait();
  EXPECT_EQ(cancelled.info.reason, FinishReason::Cancelled);
  for (size_t i = 0; i < cs.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(cs[i]->info.reason, FinishReason::Length) << cs[i]->info.error;
    EXPECT_EQ(cs[i]->ids, alone(prompts[i], 24));
  }
  const ServiceMetrics m = engine.metrics();
  EXPECT_EQ(m.kv_blocks_used, 0);
  EXPECT_GT(m.preemptions_total, 0);
  EXPECT_GT(m.spec_accepted_tokens_total, 0);
}

TEST(SpecEngine, RefusesBadSpeculativeFields) {
  EngineOptions o = options();
  o.draft_model = nullptr;
  Engine engine(*fx().model, fx().eog(), o);
  const auto prompt = fx().encode("x = 1\n", true);
  for (auto [spec, k] : std::vector<std::pair<std::string, int>>{{"bogus", 0}, {"ngram", 17}, {"ngram", -1}, {"draft", 2}}) {
    Collector c;
    EXPECT_THROW(engine.submit(spec_request(c, prompt, 4, spec, k)), Error) << spec << " " << k;
  }
}

}  // namespace
}  // namespace polykv
