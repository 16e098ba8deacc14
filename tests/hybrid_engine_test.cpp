// The engine on a hybrid model (qwen35): agents on one named pool start from the pool's recurrent-state
// checkpoint and generate exactly what their prompt gives run alone; automatic prefix caching hits only
// blocks whose end has a state checkpoint (kv/state_checkpoints.h), and with none kept
// (state_checkpoints 0) a repeated prompt is recomputed.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <fstream>
#include <mutex>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "engine/engine.h"
#include "kv/kv_block_store.h"
#include "kv/recurrent_state.h"
#include "cuda_rounding_backend.h"
#include "engine_test_util.h"
#include "hybrid_test_util.h"
#include "scarce_memory.h"
#include "test_util.h"

namespace polykv {
namespace {

constexpr int kVocab = 8000;

using Fixture = test::Qwen35Fixture;

EngineOptions options() {
  EngineOptions o;
  o.parallel = 4;
  o.kv_tokens = 4096;
  o.block_tokens = 16;
  o.n_ctx = 256;
  o.k_type = "f32";
  o.v_type = "f32";
  o.model_id = "qwen35";
  return o;
}

int argmax(const std::vector<float>& x) { return int(std::max_element(x.begin(), x.end()) - x.begin()); }

// Greedy: the document in one step, the suffix in one step, then single-token steps (the engine's
// chunking for these sizes), through a private cache.
std::vector<int32_t> alone(Model& m, const std::vector<int32_t>& doc, const std::vector<int32_t>& suffix, int n) {
  KvCache kv(m.kv_shape(), KvType::F32, KvType::F32, 256, 16);
  std::vector<float> logits(kVocab);
  m.forward(doc, kv, nullptr, false);
  m.forward(suffix, kv, logits.data(), false);
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(argmax(logits));
    if (i + 1 < n) m.forward(std::span(&out.back(), 1), kv, logits.data(), false);
  }
  return out;
}

TEST(HybridEngine, AgentsOnOnePoolMatchTheirPromptsRunAlone) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  Fixture f;
  Engine engine(*f.model, [](int32_t) { return false; }, options());
  const std::vector<int32_t> doc(f.ids.begin(), f.ids.begin() + 40);
  engine.create_pool("doc", doc, "", "");
  const int n_gen = 6;
  std::vector<std::vector<int32_t>> suffixes;
  std::vector<std::unique_ptr<test::Collector>> cs;
  for (int a = 0; a < 3; ++a) {
    std::vector<int32_t> sfx;
    for (int i = 0; i < 5 + 9 * a; ++i) sfx.push_back(int32_t((37 + 101 * a + 13 * i) % kVocab));  // 5, 14, 23 rows
    suffixes.push_back(sfx);
    cs.push_back(std::make_unique<test::Collector>());
    engine.submit(cs.back()->request(sfx, n_gen, "doc", true));
  }
  for (auto& c : cs) c->wait();
  for (int a = 0; a < 3; ++a) {
    SCOPED_TRACE(a);
    EXPECT_EQ(cs[size_t(a)]->info.reason, FinishReason::Length);
    EXPECT_EQ(cs[size_t(a)]->info.cached_tokens, int(doc.size()));  // the pool's KV and state were shared
    EXPECT_EQ(cs[size_t(a)]->ids, alone(*f.model, doc, suffixes[size_t(a)], n_gen));
  }
}

TEST(HybridEngine, NoCheckpointsNoAutomaticPrefixCaching) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  Fixture f;
  EngineOptions o = options();
  o.state_checkpoints = 0;
  Engine engine(*f.model, [](int32_t) { return false; }, o);
  const std::vector<int32_t> prompt(f.ids.begin(), f.ids.begin() + 40);
  std::vector<int32_t> first;
  for (int round = 0; round < 2; ++round) {
    test::Collector c;
    engine.submit(c.request(prompt, 4, "", true));
    c.wait();
    EXPECT_EQ(c.info.cached_tokens, 0) << "round " << round;  // recomputed: no state at a block's end
    if (round == 0) first = c.ids;
    EXPECT_EQ(c.ids, first);
  }
  EXPECT_EQ(engine.metrics().state_checkpoints, 0);
}

// Greedy tokens with their log-probabilities (top 3), as the engine streams them.
struct Scored {
  std::vector<int32_t> ids;
  std::vector<float> logprobs;
  FinishInfo info;
};

Scored run(Engine& engine, const std::vector<int32_t>& prompt, int n) {
  test::Collector c;
  GenerationRequest r = c.request(prompt, n, "", true);
  r.top_logprobs = 3;
  Scored out;
  r.on_token = [&](const TokenEvent& e) {
    out.ids.push_back(e.id);
    out.logprobs.push_back(e.logprob);
    for (const auto& t : e.top) out.logprobs.push_back(t.logprob);
    return true;
  };
  engine.submit(std::move(r));
  c.wait();
  out.info = c.info;
  return out;
}

std::vector<int32_t> tokens(int n, int salt) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(int32_t((17 + 7919 * salt + 131 * i + i * i) % kVocab));
  return t;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Prompt chunks of at most 24 rows, cut at blocks of 16: [0,16) [16,32) [32,48) [48,64) [64,70) for 70 tokens,
// each boundary a state checkpoint.
EngineOptions chunked_options() {
  EngineOptions o = options();
  o.step_tokens = 24;
  o.check_invariants = true;
  return o;
}

// The same prompt again hits its last full block (64 of 70 tokens) and restores the state there: the same
// tokens and log-probabilities bit for bit (the last chunk, [64, 70), is computed from the same state).
TEST(HybridEngine, RepeatedPromptHitsItsStateCheckpoint) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  Fixture f;
  Engine engine(*f.model, [](int32_t) { return false; }, chunked_options());
  const auto prompt = tokens(70, 1);
  const Scored a = run(engine, prompt, 6);
  EXPECT_EQ(a.info.cached_tokens, 0);
  EXPECT_EQ(engine.metrics().state_checkpoints, 4);  // 16, 32, 48, 64
  const Scored b = run(engine, prompt, 6);
  EXPECT_EQ(b.info.reason, FinishReason::Length) << b.info.error;
  EXPECT_EQ(b.info.cached_tokens, 64);
  EXPECT_EQ(b.ids, a.ids);
  EXPECT_EQ(b.logprobs, a.logprobs);
  // Against the engine without prefix caching for hybrids (other chunk ends: float rounding of the
  // recurrence differs, ~1e-6): the same tokens, log-probabilities within 1e-4.
  EngineOptions o = chunked_options();
  o.state_checkpoints = 0;
  Engine plain(*f.model, [](int32_t) { return false; }, o);
  const Scored c = run(plain, prompt, 6);
  EXPECT_EQ(c.ids, a.ids);
  ASSERT_EQ(c.logprobs.size(), a.logprobs.size());
  for (size_t i = 0; i < c.logprobs.size(); ++i) EXPECT_NEAR(c.logprobs[i], a.logprobs[i], 1e-4) << i;
}

// Many agents, one document, no named pool: the second prompt (same document, another question) hits the
// first one's checkpoint at 48 of the document's 50 tokens, and gives what it gives on a fresh engine (the
// same chunk ends there, so bit for bit).
TEST(HybridEngine, SharedDocumentHitsTheCheckpointAtItsLastFullBlock) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  Fixture f;
  const auto doc = tokens(50, 2);
  const auto q1 = concat(doc, tokens(7, 3)), q2 = concat(doc, tokens(9, 4));
  Engine engine(*f.model, [](int32_t) { return false; }, chunked_options());
  EXPECT_EQ(run(engine, q1, 4).info.cached_tokens, 0);
  const Scored hit = run(engine, q2, 6);
  EXPECT_EQ(hit.info.cached_tokens, 48);
  Engine fresh(*f.model, [](int32_t) { return false; }, chunked_options());
  const Scored alone = run(fresh, q2, 6);
  EXPECT_EQ(alone.info.cached_tokens, 0);
  EXPECT_EQ(hit.ids, alone.ids);
  EXPECT_EQ(hit.logprobs, alone.logprobs);
  const ServiceMetrics m = engine.metrics();
  EXPECT_EQ(m.cached_prompt_tokens_total, 48);
  EXPECT_EQ(m.state_checkpoint_evictions_total, 0);
  EXPECT_EQ(m.state_checkpoints, 4);  // 16, 32, 48 (q1's prompt) and 64 (q2's decode crossed a block boundary)
}

// A chat's next turn (prompt + answer + a new message) hits the state at the answer's last block boundary,
// saved by a decode step and made an anchor when the first turn finished.
TEST(HybridEngine, NextTurnHitsTheAnswersLastBlockBoundary) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  Fixture f;
  const auto p1 = tokens(40, 13);
  Engine engine(*f.model, [](int32_t) { return false; }, chunked_options());
  const Scored t1 = run(engine, p1, 30);  // positions 40..68 computed by decode steps: boundaries 48 and 64
  EXPECT_EQ(t1.info.cached_tokens, 0);
  const auto p2 = concat(concat(p1, t1.ids), tokens(5, 14));
  const Scored t2 = run(engine, p2, 6);
  EXPECT_EQ(t2.info.cached_tokens, 64);
  EngineOptions o = chunked_options();
  o.state_checkpoints = 0;
  Engine plain(*f.model, [](int32_t) { return false; }, o);
  const Scored alone = run(plain, p2, 6);
  EXPECT_EQ(t2.ids, alone.ids);
  ASSERT_EQ(t2.logprobs.size(), alone.logprobs.size());
  for (size_t i = 0; i < t2.logprobs.size(); ++i) EXPECT_NEAR(t2.logprobs[i], alone.logprobs[i], 1e-4) << i;
}

// A prompt that leaves a cached prefix where no state was kept (the first prompt ran in one chunk past it)
// recomputes it, but anchors a checkpoint where it leaves the prefix: the third prompt hits there.
TEST(HybridEngine, ADivergencePointBecomesACheckpoint) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  Fixture f;
  EngineOptions o = options();
  o.step_tokens = 64;
  o.check_invariants = true;
  const auto doc = tokens(45, 9);
  const auto q1 = concat(doc, tokens(20, 10)), q2 = concat(doc, tokens(11, 11)), q3 = concat(doc, tokens(13, 12));
  Engine engine(*f.model, [](int32_t) { return false; }, o);
  EXPECT_EQ(run(engine, q1, 3).info.cached_tokens, 0);  // [0, 64) in one chunk: one checkpoint, at 64
  EXPECT_EQ(engine.metrics().state_checkpoints, 1);
  EXPECT_EQ(run(engine, q2, 3).info.cached_tokens, 0);  // blocks [0, 32) are cached, no state at 16 or 32
  const Scored hit = run(engine, q3, 6);
  EXPECT_EQ(hit.info.cached_tokens, 32);  // q2 left the cached prefix at 32 and anchored a checkpoint there
  EngineOptions p = o;
  p.state_checkpoints = 0;
  Engine plain(*f.model, [](int32_t) { return false; }, p);
  const Scored alone = run(plain, q3, 6);
  EXPECT_EQ(hit.ids, alone.ids);
  ASSERT_EQ(hit.logprobs.size(), alone.logprobs.size());
  for (size_t i = 0; i < hit.logprobs.size(); ++i) EXPECT_NEAR(hit.logprobs[i], alone.logprobs[i], 1e-4) << i;
}

// With room for one checkpoint, only the newest survives: a prompt that shares two blocks with the first
// one finds their KV cached but no state at their end, so it is recomputed (and still right); the second
// document prompt hits the newest checkpoint.
TEST(HybridEngine, AHitNeedsACheckpointNotJustCachedBlocks) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  Fixture f;
  EngineOptions o = chunked_options();
  o.state_checkpoints = 1;
  const auto doc = tokens(50, 5);
  const auto q1 = concat(doc, tokens(7, 6)), q2 = concat(doc, tokens(9, 7));
  const auto early = concat(std::vector<int32_t>(doc.begin(), doc.begin() + 40), tokens(5, 8));
  Engine engine(*f.model, [](int32_t) { return false; }, o);
  EXPECT_EQ(run(engine, q1, 3).info.cached_tokens, 0);  // checkpoints at 16, 32 (plain), 48 (anchor): two evicted
  EXPECT_EQ(engine.metrics().state_checkpoints, 1);
  EXPECT_EQ(engine.metrics().state_checkpoint_evictions_total, 2);
  const Scored e = run(engine, early, 5);
  EXPECT_EQ(e.info.cached_tokens, 0);  // blocks [0, 32) are cached, the state at 32 is not
  EngineOptions p = o;
  p.state_checkpoints = 0;
  Engine plain(*f.model, [](int32_t) { return false; }, p);
  EXPECT_EQ(run(plain, early, 5).ids, e.ids);
  // `early` anchored its own checkpoint at 32 (its last full block, where it left the cached prefix;
  // evicting the anchor at 48): q2 hits 32 now.
  EXPECT_EQ(run(engine, q2, 3).info.cached_tokens, 32);
}

// --kv-memory holds the recurrent states of --parallel running sequences beside the KV blocks: a budget
// below them is refused with a message naming them, and above them the blocks get exactly the rest.
TEST(HybridEngine, KvMemoryHoldsTheRunningSequencesStates) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  Fixture f;
  const KvShape shape = f.model->kv_shape();
  const size_t state = RecurrentState::bytes_for(shape.recurrent);
  ASSERT_GT(state, 0u);
  EngineOptions o = options();
  o.kv_tokens = 0;
  o.state_checkpoints = 0;
  o.kv_memory_bytes = size_t(o.parallel) * state - 1;
  try {
    Engine engine(*f.model, [](int32_t) { return false; }, o);
    FAIL() << "a budget below the states was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("recurrent states"), std::string::npos) << e.what();
  }
  const KvBlockStore one(shape, KvType::F32, KvType::F32, 1, o.block_tokens);
  const size_t blocks_bytes = 10 * one.block_bytes() + 7;
  o.kv_memory_bytes = size_t(o.parallel) * state + blocks_bytes;
  Engine engine(*f.model, [](int32_t) { return false; }, o);
  EXPECT_EQ(engine.metrics().kv_blocks_total,
            KvBlockStore::blocks_for_bytes(shape, KvType::F32, KvType::F32, o.block_tokens, blocks_bytes));
  EXPECT_EQ(engine.metrics().kv_blocks_total, 10);
  // State checkpoints come out of the same budget: 3 of them leave the blocks 3 slots less, and a budget
  // that cannot hold them is refused naming them.
  const size_t slot = RecurrentState::slot_bytes_for(shape.recurrent);
  o.state_checkpoints = 3;
  o.kv_memory_bytes = size_t(o.parallel) * state + 3 * slot + blocks_bytes;
  Engine with(*f.model, [](int32_t) { return false; }, o);
  EXPECT_EQ(with.metrics().kv_blocks_total, 10);
  o.kv_memory_bytes = size_t(o.parallel) * state + 3 * slot;
  try {
    Engine none(*f.model, [](int32_t) { return false; }, o);
    FAIL() << "a budget without room for blocks beside the checkpoints was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("state checkpoints"), std::string::npos) << e.what();
  }
  // The default (-1): 2 x parallel checkpoints, at most an eighth of the budget.
  o.state_checkpoints = -1;
  o.kv_memory_bytes = size_t(o.parallel) * state + blocks_bytes + 2 * slot;
  Engine dflt(*f.model, [](int32_t) { return false; }, o);
  const int cap = int(std::min<size_t>(2 * size_t(o.parallel), o.kv_memory_bytes / 8 / slot));
  EXPECT_EQ(dflt.metrics().kv_blocks_total,
            KvBlockStore::blocks_for_bytes(shape, KvType::F32, KvType::F32, o.block_tokens,
                                           o.kv_memory_bytes - size_t(o.parallel) * state - size_t(cap) * slot));
}

using test::ScarceMemory;
class ScarceBackend : public test::CudaRoundingBackend {
 public:
  ScarceBackend() : CudaRoundingBackend(std::make_unique<CpuBackend>(2), false), mem_(1 << 20) {}
  KvMemory& kv_memory() override { return mem_; }
  void set_left(int n) { mem_.set_left(n); }

 private:
  ScarceMemory mem_;
};

// A sequence whose recurrent state cannot be allocated at admission fails alone with the error: the running
// sequences finish normally, its blocks are released, and the engine serves the next request once memory is
// back (before, the exception left the admission: the request was never answered and its blocks leaked).
TEST(HybridEngine, AdmissionOutOfMemoryFailsOnlyThatRequest) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  const std::string dir = test::fixtures_dir() + "/models/random";
  ScarceBackend be;
  auto model = Model::load(dir + "/qwen35.gguf", be);
  std::ifstream in(dir + "/qwen35.ref.json");
  const auto ids = nlohmann::json::parse(in)["ref"]["ids"].get<std::vector<int32_t>>();
  EngineOptions o = options();
  o.check_invariants = true;
  o.state_checkpoints = 0;  // no checkpoint takes the scarce memory (and each prompt runs in one chunk)
  test::Collector ca, cb, cc, cd;  // before the engine: it answers what it still holds when destroyed
  Engine engine(*model, [](int32_t) { return false; }, o);
  be.set_left(2 * 3);  // the recurrent states of two sequences (two slots and a log each), no more
  // Greedy, the prompt in one step then single tokens: the engine's chunking for these sizes.
  const auto whole = [&](const std::vector<int32_t>& p, int n) {
    KvCache kv(model->kv_shape(), KvType::F32, KvType::F32, 256, 16);
    std::vector<float> logits(kVocab);
    model->forward(p, kv, logits.data(), false);
    std::vector<int32_t> out;
    for (int i = 0; i < n; ++i) {
      out.push_back(argmax(logits));
      if (i + 1 < n) model->forward(std::span(&out.back(), 1), kv, logits.data(), false);
    }
    return out;
  };
  const std::vector<int32_t> a(ids.begin(), ids.begin() + 20), b(ids.begin() + 5, ids.begin() + 30),
      c(ids.begin() + 10, ids.begin() + 40);
  // Bounded waits: before the fix the third request was never answered (a hang, not a failure).
  const auto answered = [](test::Collector& col) {
    std::unique_lock<std::mutex> lk(col.mu);
    return col.cv.wait_for(lk, std::chrono::seconds(60), [&] { return col.done; });
  };
  engine.submit(ca.request(a, 12, "", true));
  engine.submit(cb.request(b, 12, "", true));
  engine.submit(cc.request(c, 12, "", true));
  ASSERT_TRUE(answered(ca) && answered(cb) && answered(cc)) << "a request was never answered";
  EXPECT_EQ(ca.info.reason, FinishReason::Length);
  EXPECT_EQ(cb.info.reason, FinishReason::Length);
  EXPECT_EQ(cc.info.reason, FinishReason::Error);
  EXPECT_NE(cc.info.error.find("recurrent state"), std::string::npos) << cc.info.error;
  EXPECT_EQ(ca.ids, whole(a, 12));  // (whole's KvCache takes host memory, not the scarce one)
  EXPECT_EQ(cb.ids, whole(b, 12));
  // The first two released their states (release gives the allocations back): the same prompt now runs.
  engine.submit(cd.request(c, 12, "", true));
  ASSERT_TRUE(answered(cd));
  EXPECT_EQ(cd.info.reason, FinishReason::Length) << cd.info.error;
  EXPECT_EQ(cd.ids, whole(c, 12));
}

}  // namespace
}  // namespace polykv
