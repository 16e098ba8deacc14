// The MTP drafter in the engine (serve's path, issue #10): its head needs the target's hidden state of
// every earlier position. Checked here with the shipped head (models/polykv-code-26m-mtp-head-q8_0.gguf):
//  - a long prompt prefilled in several chunks (step budget < prompt): every chunk's rows reach the
//    drafter, so it drafts from the first decode step;
//  - agents on a named pool: the pool's rows were computed by the pool's own sequence; the engine keeps
//    their hidden states and hands them to each MTP agent at admission (before 2026-12-01f the agents
//    had a gap at the pool and drafted nothing, docs/SPECULATIVE.md).
// Greedy output equals plain decoding in every case; acceptance > 0 shows the head really drafts.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "engine/engine.h"
#include "engine_test_util.h"
#include "embedded_model_fixture.h"
#include "test_util.h"

namespace polykv {
namespace {

const std::string kHead = std::string(POLYKV_SOURCE_DIR) + "/models/polykv-code-26m-mtp-head-q8_0.gguf";

test::EmbeddedModelFixture& fx() {
  static test::EmbeddedModelFixture f;
  return f;
}

std::vector<int32_t> held_out(int n) { return fx().held_out(n); }

EngineOptions options(int step_tokens) {
  EngineOptions o;
  o.parallel = 8;
  o.kv_tokens = 16384;
  o.block_tokens = 32;
  o.step_tokens = step_tokens;
  o.model_id = "embedded";
  o.check_invariants = true;
  o.spec.mtp_path = kHead;
  o.spec.policy = "fixed";  // draft n-max every step: the head's drafts are what is tested
  return o;
}

GenerationRequest mtp_request(test::Collector& c, std::vector<int32_t> prompt, int n, const std::string& pool = "") {
  GenerationRequest r = c.request(std::move(prompt), n, pool, /*ignore_eos=*/true);
  r.spec = "mtp";
  r.spec_n_max = 3;
  return r;
}

// Waits for every collector; each request ran to its length and gave the plain greedy tokens of its whole
// context (full[i]: pool + prompt, or the prompt alone).
void expect_plain_greedy(const std::vector<std::unique_ptr<test::Collector>>& cs,
                         const std::vector<std::vector<int32_t>>& full, int n_gen) {
  for (auto& c : cs) c->wait();
  for (size_t a = 0; a < cs.size(); ++a) {
    SCOPED_TRACE(a);
    EXPECT_EQ(cs[a]->info.reason, FinishReason::Length) << cs[a]->info.error;
    EXPECT_EQ(cs[a]->ids, fx().plain_greedy(full[a], n_gen));
  }
}

TEST(SpecMtpEngine, LongPromptInChunksDrafts) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  const std::vector<int32_t> prompt = held_out(700);
  Engine engine(*fx().model, fx().eog(), options(/*step_tokens=*/128));  // the prompt takes 6 chunks
  test::Collector c;
  engine.submit(mtp_request(c, prompt, 32));
  c.wait();
  EXPECT_EQ(c.info.reason, FinishReason::Length) << c.info.error;
  EXPECT_EQ(c.ids, fx().plain_greedy(prompt, 32));
  const ServiceMetrics m = engine.metrics();
  EXPECT_GT(m.spec_drafted_tokens_total, 0);
  EXPECT_GT(m.spec_accepted_tokens_total, 0);
}

TEST(SpecMtpEngine, PoolAgentsDraft) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  const std::vector<int32_t> doc = held_out(600);
  Engine engine(*fx().model, fx().eog(), options(/*step_tokens=*/256));  // the pool takes 3 chunks
  engine.create_pool("doc", doc, "", "");
  const int n_agents = 3, n_gen = 24;
  std::vector<std::unique_ptr<test::Collector>> cs;
  std::vector<std::vector<int32_t>> full;
  for (int a = 0; a < n_agents; ++a) {
    const auto prompt = fx().encode("\n\ndef helper_" + std::to_string(a) + "(self):\n    return self.", false);
    cs.push_back(std::make_unique<test::Collector>());
    engine.submit(mtp_request(*cs.back(), prompt, n_gen, "doc"));
    std::vector<int32_t> f = doc;
    f.insert(f.end(), prompt.begin(), prompt.end());
    full.push_back(std::move(f));
  }
  expect_plain_greedy(cs, full, n_gen);
  const ServiceMetrics m = engine.metrics();
  // Fixed policy, n-max 3: every agent drafts in each of its decode steps once the head has its rows.
  EXPECT_GE(m.spec_drafted_tokens_total, n_agents * 3) << "the agents' heads had a gap at the pool";
  EXPECT_GT(m.spec_accepted_tokens_total, 0);
}

// ngram+mtp (engine/spec/hybrid_drafter.h) through the engine: its MTP head is the engine's shared one, run
// per sequence on the generic path; agents on a pool get all the pool's hidden rows. Adaptive policy (the
// server's default), so the per-source acceptance estimates are exercised; greedy output equals plain.
TEST(SpecMtpEngine, HybridNgramMtpAgentsAndAlone) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  const std::vector<int32_t> doc = held_out(500);
  EngineOptions o = options(/*step_tokens=*/256);
  o.spec.policy = "adaptive";
  Engine engine(*fx().model, fx().eog(), o);
  engine.create_pool("doc", doc, "", "");
  const int n_gen = 40;
  std::vector<std::unique_ptr<test::Collector>> cs;
  std::vector<std::vector<int32_t>> full;
  for (int a = 0; a < 4; ++a) {
    const bool on_pool = a < 3;
    const auto prompt = on_pool ? fx().encode("\n\ndef helper_" + std::to_string(a) + "(self):\n    return self.", false)
                                : held_out(300);
    cs.push_back(std::make_unique<test::Collector>());
    GenerationRequest r = mtp_request(*cs.back(), prompt, n_gen, on_pool ? "doc" : "");
    r.spec = "ngram+mtp";
    r.spec_n_max = a == 0 ? 0 : 5;  // 0: the kind's default (8)
    engine.submit(std::move(r));
    std::vector<int32_t> f = on_pool ? doc : std::vector<int32_t>{};
    f.insert(f.end(), prompt.begin(), prompt.end());
    full.push_back(std::move(f));
  }
  expect_plain_greedy(cs, full, n_gen);
  const ServiceMetrics m = engine.metrics();
  EXPECT_GT(m.spec_drafted_tokens_total, 0);
  EXPECT_GT(m.spec_accepted_tokens_total, 0);
  EXPECT_TRUE(engine.delete_pool("doc"));  // its blocks are freed by the step thread, later
}

// ngram+mtp pool agents take the pool's rows from the engine's shared head KV (one head pass over the pool per
// pool, copied into each agent's head) instead of a copy of every pool row's hidden state per agent. Suffixes
// of rare tokens: the first steps find no 2-token match, so the head drafts (fixed policy).
TEST(SpecMtpEngine, HybridPoolAgentsShareThePoolsHeadRows) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  const std::vector<int32_t> doc = held_out(400);
  Engine engine(*fx().model, fx().eog(), options(/*step_tokens=*/256));
  engine.create_pool("doc", doc, "", "");
  std::vector<std::unique_ptr<test::Collector>> cs;
  std::vector<std::vector<int32_t>> full;
  for (int a = 0; a < 2; ++a) {
    const auto prompt = fx().encode(a ? "\n# zqxv kjwp 7731\n" : "\n# wvqz pjkx 1377\n", false);
    cs.push_back(std::make_unique<test::Collector>());
    GenerationRequest r = mtp_request(*cs.back(), prompt, 16, "doc");
    r.spec = "ngram+mtp";
    engine.submit(std::move(r));
    std::vector<int32_t> f = doc;
    f.insert(f.end(), prompt.begin(), prompt.end());
    full.push_back(std::move(f));
  }
  expect_plain_greedy(cs, full, 16);
  const ServiceMetrics m = engine.metrics();
  EXPECT_GT(m.spec_mtp_shared_rows_total, 0) << "the agents' heads did not take the pool's shared rows";
  EXPECT_GT(m.spec_drafted_tokens_total, 0);
}

}  // namespace
}  // namespace polykv
