// The engine on a hybrid model (qwen35): agents on one named pool start from the pool's recurrent-state
// checkpoint and generate exactly what their prompt gives run alone; automatic prefix caching is off for
// hybrid models (a cached block has no state at its end), so a repeated prompt is recomputed.
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

TEST(HybridEngine, NoAutomaticPrefixCaching) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  Fixture f;
  Engine engine(*f.model, [](int32_t) { return false; }, options());
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
}

// A memory that refuses allocations once `left` blocks of bytes are out (a GPU out of memory), to reach the
// engine's admission failure on the CPU.
class ScarceMemory : public KvMemory {
 public:
  explicit ScarceMemory(int left) : left_(left) {}
  void* allocate(size_t bytes) override {
    if (left_ <= 0) return nullptr;
    --left_;
    return host_kv_memory().allocate(bytes);
  }
  void release(void* p) override {
    if (!p) return;
    ++left_;
    host_kv_memory().release(p);
  }
  void copy(void* d, const void* s, size_t n) override { host_kv_memory().copy(d, s, n); }
  bool host_accessible() const override { return true; }
  const char* name() const override { return "scarce host"; }
  void set_left(int n) { left_ = n; }

 private:
  int left_;
};
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
