// The engine end to end on the embedded model, without HTTP: many agents on one named pool, prefix
// caching, cancellation and preemption, each output compared with the same prompt run alone.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "engine/generate.h"
#include "engine_test_util.h"
#include "embedded_model_fixture.h"
#include "scoped_env.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace polykv {
namespace {

using Fixture = test::EmbeddedModelFixture;

Fixture& fx() {
  static Fixture f;
  return f;
}

SamplingParams greedy() {
  SamplingParams p;
  p.temperature = 0;
  return p;
}

// Greedy continuation of `prompt` run alone through a private cache (the reference).
std::vector<int32_t> alone(const std::vector<int32_t>& prompt, int n, const std::string& kt, const std::string& vt) {
  KvCache kv = make_kv_cache(fx().model->kv_shape(), kt, vt, 2048);
  std::vector<int32_t> out;
  GenerateOptions o;
  o.n_predict = n;
  o.sampling = greedy();
  GenerateCallbacks cb;
  cb.on_token = [&](int32_t id) {
    out.push_back(id);
    return true;
  };
  cb.is_eog = fx().eog();
  generate(*fx().model, kv, prompt, o, cb);
  return out;
}

using test::Collector;

EngineOptions options() {
  EngineOptions o;
  o.parallel = 16;
  o.kv_tokens = 16384;
  o.block_tokens = 32;
  o.model_id = "embedded";
  return o;
}

const char* kDocument =
    "import os\nimport sys\n\nclass Config:\n    \"\"\"Settings read from the environment.\"\"\"\n\n"
    "    def __init__(self, prefix='APP_'):\n        self.prefix = prefix\n        self.values = {}\n"
    "        for key, value in os.environ.items():\n            if key.startswith(prefix):\n"
    "                self.values[key[len(prefix):].lower()] = value\n\n    def get(self, name, default=None):\n"
    "        return self.values.get(name, default)\n\n";

// n_agents on one pool, 12 greedy tokens each, each equal to its prompt run alone.
void expect_agents_match_alone(int n_agents) {
  Engine engine(*fx().model, fx().eog(), options());
  const std::vector<int32_t> doc = fx().encode(kDocument, true);
  const PoolInfo pi = engine.create_pool("doc", doc, "", "");
  EXPECT_EQ(pi.n_tokens, int(doc.size()));
  EXPECT_GT(pi.kv_bytes, 0u);
  const int n_gen = 12;
  std::vector<std::unique_ptr<Collector>> cs;
  std::vector<std::vector<int32_t>> suffixes;
  for (int a = 0; a < n_agents; ++a) {
    suffixes.push_back(fx().encode("\ndef agent_" + std::to_string(a) + "_task_" + std::string(size_t(a % 3 + 1), 'x') + "(config):\n", false));
    cs.push_back(std::make_unique<Collector>());
    engine.submit(cs.back()->request(suffixes.back(), n_gen, "doc"));
  }
  for (auto& c : cs) c->wait();
  for (int a = 0; a < n_agents; ++a) {
    SCOPED_TRACE(a);
    std::vector<int32_t> full = doc;
    full.insert(full.end(), suffixes[size_t(a)].begin(), suffixes[size_t(a)].end());
    EXPECT_EQ(cs[size_t(a)]->info.reason, FinishReason::Length);
    EXPECT_EQ(cs[size_t(a)]->info.prompt_tokens, int(full.size()));
    EXPECT_EQ(cs[size_t(a)]->info.cached_tokens, int(doc.size()));
    EXPECT_EQ(cs[size_t(a)]->ids, alone(full, n_gen, "q8_0", "turbo3t"));
  }
  EXPECT_EQ(engine.get_pool("doc")->hits, n_agents);
  EXPECT_TRUE(engine.delete_pool("doc"));
  EXPECT_FALSE(engine.get_pool("doc").has_value());
}

TEST(Engine, AgentsOnOnePoolMatchTheirPromptsRunAlone) { expect_agents_match_alone(16); }

// The same with greedy rows taking the backend's argmax (Model::BatchSeq::argmax: what GPU backends do by
// default; POLYKV_ENGINE_ARGMAX=device makes the CPU backend do it too).
TEST(Engine, AgentsWithTheBackendArgmaxMatchTheirPromptsRunAlone) {
  const test::ScopedEnv env{{"POLYKV_ENGINE_ARGMAX", "device"}};
  expect_agents_match_alone(8);
}

TEST(Engine, SecondRequestReusesCachedPrefixBlocks) {
  Engine engine(*fx().model, fx().eog(), options());
  const std::vector<int32_t> prompt = fx().encode(kDocument, true);
  Collector a, b;
  engine.submit(a.request(prompt, 4));
  a.wait();
  engine.submit(b.request(prompt, 4));
  b.wait();
  EXPECT_EQ(a.info.cached_tokens, 0);
  EXPECT_EQ(b.info.cached_tokens, int(prompt.size() - 1) / 32 * 32);
  EXPECT_EQ(a.ids, b.ids);
  EXPECT_EQ(a.ids, alone(prompt, 4, "q8_0", "turbo3t"));
}

TEST(Engine, CacheSaltSeparatesTenants) {
  Engine engine(*fx().model, fx().eog(), options());
  const std::vector<int32_t> prompt = fx().encode(kDocument, true);
  Collector a, b, c;
  GenerationRequest ra = a.request(prompt, 2), rb = b.request(prompt, 2), rc = c.request(prompt, 2);
  ra.cache_salt = "tenant-a";
  rb.cache_salt = "tenant-b";
  rc.cache_salt = "tenant-a";
  engine.submit(std::move(ra));
  a.wait();
  engine.submit(std::move(rb));
  b.wait();
  engine.submit(std::move(rc));
  c.wait();
  EXPECT_EQ(b.info.cached_tokens, 0);  // another tenant's prefix is never shared
  EXPECT_GT(c.info.cached_tokens, 0);  // the same tenant's is
  EXPECT_EQ(a.ids, b.ids);
}

TEST(Engine, CancelAndPreemptionLeaveNoBlocksBehind) {
  EngineOptions o = options();
  o.kv_tokens = 32 * 24;  // 24 blocks: far fewer than 8 sequences of ~190 tokens need at once
  o.step_tokens = 64;
  o.wait_for_running_prefix = false;  // all eight compute the shared document at once, and run out of blocks
  Engine engine(*fx().model, fx().eog(), o);
  std::vector<std::unique_ptr<Collector>> cs;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 8; ++i) {
    prompts.push_back(fx().encode(std::string(kDocument) + "# variant " + std::to_string(i) + "\n", true));
    cs.push_back(std::make_unique<Collector>());
    engine.submit(cs.back()->request(prompts.back(), 24));
  }
  Collector cancelled;
  const uint64_t id = engine.submit(cancelled.request(prompts[0], 200));
  engine.cancel(id);
  for (auto& c : cs) c->wait();
  cancelled.wait();
  EXPECT_EQ(cancelled.info.reason, FinishReason::Cancelled);
  for (size_t i = 0; i < cs.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(cs[i]->info.reason, FinishReason::Length);
    EXPECT_EQ(cs[i]->ids, alone(prompts[i], 24, "q8_0", "turbo3t"));
  }
  const ServiceMetrics m = engine.metrics();
  EXPECT_EQ(m.kv_blocks_used, 0);
  EXPECT_GT(m.preemptions_total, 0);
}

TEST(Engine, RefusesRequestsThatCanNeverRun) {
  Engine engine(*fx().model, fx().eog(), options());
  Collector c;
  EXPECT_THROW(engine.submit(c.request({1, 2, 3}, 4, "no-such-pool")), Error);
  EXPECT_THROW(engine.submit(c.request({}, 4)), Error);
  EXPECT_THROW(engine.submit(c.request({1, 99999999}, 4)), Error);
  EXPECT_THROW(engine.submit(c.request(std::vector<int32_t>(size_t(engine.model_info().n_ctx), 5), 4)), Error);
  EXPECT_THROW(engine.create_pool("bad name!", {1, 2}, "", ""), Error);
  EXPECT_THROW(engine.create_pool("p", {1, 2}, "f16", ""), Error);
  engine.create_pool("p", {1, 2, 3}, "", "");
  EXPECT_THROW(engine.create_pool("p", {1, 2}, "", ""), Error);
}

}  // namespace
}  // namespace polykv
