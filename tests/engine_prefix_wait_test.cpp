// Prefix-aware admission (Engine::wait_for_running_prefix): requests that arrive together on one document,
// with no named pool, wait for the first one to compute the document and then hit it in the prefix cache,
// instead of each computing it; their outputs stay those of each prompt run alone. On the embedded model
// (dense) and on the qwen35 fixture (hybrid: the first one is told to end a chunk, and leave a state
// checkpoint, where the prompts part).
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/engine.h"
#include "engine_test_util.h"
#include "embedded_model_fixture.h"
#include "hybrid_test_util.h"
#include "test_util.h"

namespace polykv {
namespace {

// Holds the engine's step thread inside a token callback until released, so that the requests submitted
// meanwhile are all waiting when the next admission runs (the test does not depend on timing).
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool entered = false, open = false;
  GenerationRequest blocker(int32_t token) {
    GenerationRequest r;
    r.prompt = {token};
    r.max_tokens = 1;
    r.ignore_eos = true;
    r.sampling.temperature = 0;
    r.on_token = [this](const TokenEvent&) {
      std::unique_lock<std::mutex> lk(mu);
      entered = true;
      cv.notify_all();
      cv.wait(lk, [&] { return open; });
      return true;
    };
    return r;
  }
  void wait_entered() {
    std::unique_lock<std::mutex> lk(mu);
    cv.wait(lk, [&] { return entered; });
  }
  void release() {
    std::lock_guard<std::mutex> lk(mu);
    open = true;
    cv.notify_all();
  }
};

std::vector<int32_t> tokens(int n, int salt, int n_vocab) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(int32_t((17 + 7919 * salt + 131 * i + i * i) % n_vocab));
  return t;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Submits the prompts together (while the step thread is held), waits for all; returns the collectors.
std::vector<std::unique_ptr<test::Collector>> together(Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                                                       int n_gen, int32_t blocker_token) {
  Gate gate;
  test::Collector blocked;
  GenerationRequest b = gate.blocker(blocker_token);
  b.on_done = [&](const FinishInfo& fi) {
    std::lock_guard<std::mutex> lk(blocked.mu);
    blocked.info = fi;
    blocked.done = true;
    blocked.cv.notify_all();
  };
  engine.submit(std::move(b));
  gate.wait_entered();
  std::vector<std::unique_ptr<test::Collector>> cs;
  for (const auto& p : prompts) {
    cs.push_back(std::make_unique<test::Collector>());
    engine.submit(cs.back()->request(p, n_gen, "", true));
  }
  gate.release();
  blocked.wait();
  for (auto& c : cs) c->wait();
  return cs;
}

EngineOptions dense_options(bool wait) {
  EngineOptions o;
  o.parallel = 8;
  o.kv_tokens = 8192;
  o.block_tokens = 16;
  o.step_tokens = 64;  // the document takes several steps
  o.model_id = "embedded";
  o.wait_for_running_prefix = wait;
  o.check_invariants = true;
  return o;
}

TEST(PrefixWait, AgentsArrivingTogetherComputeTheDocumentOnce) {
  test::EmbeddedModelFixture f;
  const int V = f.model->config().n_vocab;
  const auto doc = tokens(200, 1, V);
  std::vector<std::vector<int32_t>> prompts;
  for (int a = 0; a < 4; ++a) prompts.push_back(concat(doc, tokens(5 + 3 * a, 2 + a, V)));
  Engine engine(*f.model, [](int32_t) { return false; }, dense_options(true));
  const auto cs = together(engine, prompts, 6, 7);
  Engine plain(*f.model, [](int32_t) { return false; }, dense_options(false));
  const auto ref = together(plain, prompts, 6, 7);
  int64_t cached = 0, cached_plain = 0;
  for (int a = 0; a < 4; ++a) {
    SCOPED_TRACE(a);
    EXPECT_EQ(cs[size_t(a)]->info.reason, FinishReason::Length) << cs[size_t(a)]->info.error;
    EXPECT_EQ(cs[size_t(a)]->ids, ref[size_t(a)]->ids);  // the dense engine is batch-invariant: bit for bit
    EXPECT_EQ(cs[size_t(a)]->info.cached_tokens, a == 0 ? 0 : 192);  // the document's 12 full blocks
    cached += cs[size_t(a)]->info.cached_tokens;
    cached_plain += ref[size_t(a)]->info.cached_tokens;
  }
  EXPECT_EQ(cached, 3 * 192);
  EXPECT_EQ(cached_plain, 0);  // all four admitted together: each computed the document
  EXPECT_EQ(engine.metrics().prefix_waits_total, 3);
  EXPECT_EQ(plain.metrics().prefix_waits_total, 0);
}

// Only a shared prefix waits: an unrelated prompt, and one with another cache_salt, are admitted at once.
TEST(PrefixWait, UnrelatedOrOtherSaltDoesNotWait) {
  test::EmbeddedModelFixture f;
  const int V = f.model->config().n_vocab;
  const auto doc = tokens(200, 1, V);
  Engine engine(*f.model, [](int32_t) { return false; }, dense_options(true));
  Gate gate;
  engine.submit(gate.blocker(7));
  gate.wait_entered();
  test::Collector first, unrelated, salted;
  engine.submit(first.request(concat(doc, tokens(5, 2, V)), 4, "", true));
  engine.submit(unrelated.request(tokens(150, 9, V), 4, "", true));
  GenerationRequest r = salted.request(concat(doc, tokens(6, 3, V)), 4, "", true);
  r.cache_salt = "tenant-b";
  engine.submit(std::move(r));
  gate.release();
  first.wait();
  unrelated.wait();
  salted.wait();
  EXPECT_EQ(engine.metrics().prefix_waits_total, 0);
  EXPECT_EQ(salted.info.cached_tokens, 0);
}

// The hybrid fixture: the waiting prompts hit the document at the block where they part from the first one
// (48 of 50 document tokens), a chunk end the first one was told to make (its budget alone would have ended
// chunks at 32 and 64, and the waiters would have hit 32).
TEST(PrefixWait, HybridWaitersHitTheAnchorTheFirstOneLeaves) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  test::Qwen35Fixture f;
  const int V = test::Qwen35Fixture::kVocab;
  EngineOptions o;
  o.parallel = 4;
  o.kv_tokens = 4096;
  o.block_tokens = 16;
  o.step_tokens = 40;  // without the anchor, the first prompt's chunks would end at 32 and 64
  o.n_ctx = 256;
  o.k_type = o.v_type = "f32";
  o.model_id = "qwen35";
  o.check_invariants = true;
  const auto doc = tokens(50, 4, V);
  std::vector<std::vector<int32_t>> prompts;
  for (int a = 0; a < 3; ++a) prompts.push_back(concat(doc, tokens(20 + 4 * a, 5 + a, V)));
  Engine engine(*f.model, [](int32_t) { return false; }, o);
  const auto cs = together(engine, prompts, 5, 7);
  EXPECT_EQ(engine.metrics().prefix_waits_total, 2);
  for (int a = 0; a < 3; ++a) {
    SCOPED_TRACE(a);
    EXPECT_EQ(cs[size_t(a)]->info.reason, FinishReason::Length) << cs[size_t(a)]->info.error;
    EXPECT_EQ(cs[size_t(a)]->info.cached_tokens, a == 0 ? 0 : 48);
  }
  // Each prompt alone on a fresh engine ends its chunks at 32 and 64, not at 48: the recurrence's float
  // rounding differs (~1e-6), the greedy tokens do not.
  for (int a = 1; a < 3; ++a) {
    Engine fresh(*f.model, [](int32_t) { return false; }, o);
    test::Collector c;
    fresh.submit(c.request(prompts[size_t(a)], 5, "", true));
    c.wait();
    EXPECT_EQ(cs[size_t(a)]->ids, c.ids) << a;
  }
}

}  // namespace
}  // namespace polykv
