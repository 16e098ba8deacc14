// The adaptive speculation policy in the engine (engine/spec/spec_policy.h): agents on a shared pool
// and independent requests with the n-gram drafter or a draft model give the tokens of plain greedy
// decoding whatever the policy plans, and the plan follows the step cost: with rows that cost
// nothing next to the step's fixed part every step drafts, with rows that are the whole cost only the
// probes draft. The cost model is fixed (EngineOptions::spec_cost_*) so the plans are deterministic.
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/engine.h"
#include "engine_test_util.h"
#include "embedded_model_fixture.h"

namespace polykv {
namespace {

struct Fixture : test::EmbeddedModelFixture {
  std::unique_ptr<Model> draft = Model::load(test::embedded_model(), backend);  // drafts for itself
};

Fixture& fx() {
  static Fixture f;
  return f;
}

const char* kCode =
    "import os\nimport sys\n\nclass Config:\n    def __init__(self, prefix='APP_'):\n        self.prefix = prefix\n"
    "        self.values = {}\n        for key, value in os.environ.items():\n            if key.startswith(prefix):\n"
    "                self.values[key[len(prefix):].lower()] = value\n\n    def get(self, name, default=None):\n"
    "        return self.values.get(name, default)\n\n";

using test::Collector;

struct Outcome {
  ServiceMetrics m;
  bool lossless = true;
};

// 8 agents on a pool (spec `spec` for all) plus 2 independent requests, adaptive policy under the
// cost model T(R) = fixed + per_row * R; checks every output against plain greedy decoding.
Outcome run(const std::string& spec, double fixed, double per_row) {
  EngineOptions o;
  o.parallel = 16;
  o.kv_tokens = 16384;
  o.block_tokens = 32;
  o.model_id = "embedded";
  o.check_invariants = true;
  o.draft_model = fx().draft.get();
  o.spec_cost_fixed = fixed;
  o.spec_cost_per_row = per_row;
  Engine engine(*fx().model, fx().eog(), o);
  const std::vector<int32_t> doc = fx().encode(kCode, true);
  engine.create_pool("doc", doc, "", "");
  const int n_gen = 24;
  std::vector<std::unique_ptr<Collector>> cs;
  std::vector<std::vector<int32_t>> full;
  for (int a = 0; a < 10; ++a) {
    const bool agent = a < 8;
    auto prompt = agent ? fx().encode("\n    def method_" + std::to_string(a) + "(self):\n        return self.", false)
                        : fx().encode(std::string(kCode) + "# part " + std::to_string(a) + "\nclass ", true);
    cs.push_back(std::make_unique<Collector>());
    GenerationRequest r = cs.back()->request(prompt, n_gen, agent ? "doc" : "");
    r.spec = spec;
    r.spec_n_max = 3;
    engine.submit(std::move(r));
    std::vector<int32_t> f = agent ? doc : std::vector<int32_t>{};
    f.insert(f.end(), prompt.begin(), prompt.end());
    full.push_back(std::move(f));
  }
  for (auto& c : cs) c->wait();  // the engine's thread uses the model until then
  Outcome out;
  for (size_t a = 0; a < cs.size(); ++a) {
    SCOPED_TRACE(a);
    EXPECT_EQ(cs[a]->info.reason, FinishReason::Length) << cs[a]->info.error;
    const bool same = cs[a]->ids == fx().plain_greedy(full[a], n_gen, fx().eog());
    EXPECT_TRUE(same);
    out.lossless = out.lossless && same;
  }
  out.m = engine.metrics();
  EXPECT_EQ(out.m.generated_tokens_total, 10 * n_gen);
  return out;
}

TEST(SpecAdaptiveEngine, CheapRowsDraftEveryStepAndStayLossless) {
  for (const char* spec : {"ngram", "draft"}) {
    SCOPED_TRACE(spec);
    const Outcome o = run(spec, /*fixed=*/1000, /*per_row=*/1);  // rows are nearly free: draft n-max
    EXPECT_TRUE(o.lossless);
    EXPECT_GT(o.m.spec_accepted_tokens_total, 0);
    // Every verify step of the draft model drafts (its drafter always proposes n-max tokens).
    if (std::string(spec) == "draft") EXPECT_GT(o.m.spec_drafted_tokens_total, 2 * o.m.spec_steps_total);
  }
}

TEST(SpecAdaptiveEngine, DearRowsDraftOnlyProbesAndStayLossless) {
  for (const char* spec : {"ngram", "draft"}) {
    SCOPED_TRACE(spec);
    // Rows are the whole cost: a draft pays only if accepted with probability above tokens/rows of
    // the batch; accepted-all drafts (the draft model is the target itself) still do.
    const Outcome cheap = run(spec, 1000, 1);
    const Outcome dear = run(spec, 0, 1);
    EXPECT_TRUE(dear.lossless);
    EXPECT_LT(dear.m.spec_drafted_tokens_total, cheap.m.spec_drafted_tokens_total);
    EXPECT_GT(dear.m.spec_steps_total, cheap.m.spec_steps_total);  // fewer tokens per step
  }
}

// 8 agents on a pool only, agent a generating n_gen[a] tokens, under T(R) = per_row * R (no fixed part:
// with 2+ decoding sequences a draft cannot pay even if accepted). Checks the output against plain decoding.
ServiceMetrics run_agents(const std::string& spec, const std::vector<int>& n_gen) {
  EngineOptions o;
  o.parallel = 8;
  o.kv_tokens = 16384;
  o.block_tokens = 32;
  o.model_id = "embedded";
  o.check_invariants = true;
  o.draft_model = fx().draft.get();
  o.spec_cost_fixed = 0;
  o.spec_cost_per_row = 1;
  Engine engine(*fx().model, fx().eog(), o);
  const std::vector<int32_t> doc = fx().encode(kCode, true);
  engine.create_pool("doc", doc, "", "");
  std::vector<std::unique_ptr<Collector>> cs;
  std::vector<std::vector<int32_t>> full;
  const char* words[] = {" self", " return", " def", " if", " for", " value", " key", " name"};
  for (size_t a = 0; a < n_gen.size(); ++a) {
    // A one-token prompt: an agent's first step is a one-row step like a decode, so no step has rows
    // that make its tokens dearer than a draft's (a step with prompt chunks may draft on merit).
    const std::vector<int32_t> prompt{fx().encode(words[a % 8], false).at(0)};
    cs.push_back(std::make_unique<Collector>());
    GenerationRequest r = cs.back()->request(prompt, n_gen[a], "doc");
    r.spec = spec;
    r.spec_n_max = 3;
    engine.submit(std::move(r));
    std::vector<int32_t> f = doc;
    f.insert(f.end(), prompt.begin(), prompt.end());
    full.push_back(std::move(f));
  }
  for (auto& c : cs) c->wait();
  for (size_t a = 0; a < cs.size(); ++a) {
    SCOPED_TRACE(a);
    // Length, or Stop where plain greedy decoding ends there too (agent 3 reaches an end-of-generation token
    // with the default K/V types since their levels became f16-exact, 2026-12-02).
    EXPECT_TRUE(cs[a]->info.reason == FinishReason::Length || cs[a]->info.reason == FinishReason::Stop)
        << cs[a]->info.error;
    EXPECT_EQ(cs[a]->ids, fx().plain_greedy(full[a], n_gen[a], fx().eog()));
  }
  return engine.metrics();
}

// 2026-12-02: a batch where no draft can pay at any acceptance makes no probes, so the draft model never
// drafts nor copies the pool's draft KV for its agents (before: every agent probed after 8 steps, copied
// the pool and caught up its suffix). The agent left alone when the others finish probes at once.
TEST(SpecAdaptiveEngine, CostBoundAgentsSkipProbesUntilTheBatchShrinks) {
  for (const char* spec : {"ngram", "draft"}) {
    SCOPED_TRACE(spec);
    const ServiceMetrics together = run_agents(spec, std::vector<int>(8, 32));
    EXPECT_EQ(together.spec_drafted_tokens_total, 0);
    EXPECT_EQ(together.spec_draft_shared_tokens_total, 0);
    std::vector<int> last_longer(8, 16);
    last_longer[7] = 48;  // alone for its last 32 tokens: probes (lands: the draft model is the target)
    const ServiceMetrics alone = run_agents(spec, last_longer);
    EXPECT_GT(alone.spec_drafted_tokens_total, 0);
    if (std::string(spec) == "draft") EXPECT_GT(alone.spec_draft_shared_tokens_total, 0);
  }
}

TEST(SpecAdaptiveEngine, RefusesAnUnknownPolicy) {
  EngineOptions o;
  o.kv_tokens = 4096;
  Engine engine(*fx().model, fx().eog(), o);
  Collector c;
  GenerationRequest r = c.request(fx().encode("x = 1\n", true), 4);
  r.spec = "ngram";
  r.spec_policy = "sometimes";
  EXPECT_THROW(engine.submit(std::move(r)), Error);
}

}  // namespace
}  // namespace polykv
