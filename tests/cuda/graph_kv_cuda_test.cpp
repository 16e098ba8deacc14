// CUDA step graphs and the KV they were recorded over (issue #9, EngineCuda.AgentsOnOnePoolInGpuMemory's
// intermittent "illegal memory access", 2026-12-01).
//
// A recorded step graph holds, by value, the device address and the layout of the KV pool it wrote and
// read. Its key used to hold the KvBlockStore object's HOST address instead: a KV freed and another made
// in its place (a fresh KV per request, per generate(), per Engine) often lands at the same host address
// while its bytes are elsewhere, so the next decode step replayed the old graph over the freed bytes:
// a fault when the driver had unmapped them, wrong tokens otherwise. The key now holds the bytes'
// address and the layout (StepPlan::store_key), and a backend release() drops every graph.
//
// CudaStepPlan.StoreKey*: the key, on the CPU (CI too).
// CudaGraphKv.*: on the GPU. A fresh KV in the very storage of a freed one (std::optional: the same host
// address, guaranteed) whose bytes are elsewhere (the freed bytes are held by another allocation, so a
// stale replay writes there: no fault, wrong tokens, every time) must give the tokens of a KV that never
// shared an address; the same with other K/V types in that storage. And the engine test repeated with
// Engines made one after the other in one storage, pools of other sizes, other agent counts and suffixes.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../engine_test_util.h"
#include "../test_util.h"
#include "backend/backend.h"
#include "backend/cuda/cuda_backend_plan.h"
#include "core/error.h"
#include "cuda_test_util.h"
#include "engine/engine.h"
#include "engine/generate.h"
#include "engine/sequence_kv.h"
#include "kv/kv_block_store.h"
#include "kv/owned_paged_kv.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace polykv {
namespace {

// ---- the key, on the CPU --------------------------------------------------------------------------

// Host bytes that claim to be a device's; never hands out an address twice (freed blocks are kept),
// as a device allocator may do when the freed region is still held by someone else.
class NoReuseMemory final : public KvMemory {
 public:
  ~NoReuseMemory() override {
    for (void* p : freed_) ::operator delete(p);
  }
  void* allocate(size_t bytes) override { return ::operator new(bytes); }
  void release(void* p) override { freed_.push_back(p); }
  void copy(void*, const void*, size_t) override { fail("NoReuseMemory::copy"); }
  bool host_accessible() const override { return false; }
  const char* name() const override { return "fake:0"; }

 private:
  std::vector<void*> freed_;
};

const KvShape kShape{2, 2, 64, 64, {}, {}};

cuda::StepPlan plan_one(const OwnedPagedKv& kv, KvMemory& mem) {
  const StepSeq s{const_cast<OwnedPagedKv*>(&kv), 0, 3, 0};
  return cuda::plan_step(std::span<const StepSeq>(&s, 1), mem);
}

TEST(CudaStepPlan, StoreKeyFollowsTheBytesNotTheStoreObject) {
  NoReuseMemory mem;
  std::optional<OwnedPagedKv> slot;
  slot.emplace(kShape, KvType::F16, KvType::F16, 64, 16, mem);
  const cuda::StepPlan a = plan_one(*slot, mem);
  slot.reset();
  slot.emplace(kShape, KvType::F16, KvType::F16, 64, 16, mem);  // same object address, bytes elsewhere
  const cuda::StepPlan b = plan_one(*slot, mem);
  ASSERT_EQ(a.store, b.store) << "the test needs the second store at the first one's host address";
  EXPECT_NE(a.store_key, 0u);
  EXPECT_NE(a.store_key, b.store_key) << "a graph recorded over the first store's bytes would be replayed";
  // The same store planned twice: the same key (graphs are replayed across steps).
  EXPECT_EQ(plan_one(*slot, mem).store_key, b.store_key);
}

TEST(CudaStepPlan, StoreKeyCoversTheLayout) {
  // Stores whose bytes sit at one address (a memory that always hands out the same buffer): a key of
  // the address alone would match. Each layout field the kernels read changes the key.
  struct ReuseMemory final : public KvMemory {
    alignas(64) unsigned char buf[1 << 20];
    void* allocate(size_t bytes) override { return bytes <= sizeof buf ? buf : nullptr; }
    void release(void*) override {}
    void copy(void*, const void*, size_t) override {}
    bool host_accessible() const override { return false; }
    const char* name() const override { return "fake:1"; }
  };
  auto reuse = std::make_unique<ReuseMemory>();
  auto key_at = [&](const KvShape& s, KvType kt, KvType vt, int blocks, int bt) {
    KvBlockStore st(s, kt, vt, blocks, bt, *reuse);
    EXPECT_EQ(static_cast<const void*>(st.data()), static_cast<const void*>(reuse->buf));
    return cuda::store_key(st);
  };
  const uint64_t r0 = key_at(kShape, KvType::F16, KvType::F16, 4, 16);
  EXPECT_EQ(key_at(kShape, KvType::F16, KvType::F16, 4, 16), r0);
  EXPECT_NE(key_at(kShape, KvType::Q8_0, KvType::F16, 4, 16), r0);
  EXPECT_NE(key_at(kShape, KvType::F16, KvType::Turbo3T, 4, 16), r0);
  EXPECT_NE(key_at(kShape, KvType::F16, KvType::F16, 5, 16), r0);
  EXPECT_NE(key_at(kShape, KvType::F16, KvType::F16, 4, 32), r0);
  EXPECT_NE(key_at(KvShape{3, 2, 64, 64, {}, {}}, KvType::F16, KvType::F16, 4, 16), r0);
  EXPECT_NE(key_at(KvShape{2, 1, 64, 64, {}, {}}, KvType::F16, KvType::F16, 4, 16), r0);
  EXPECT_NE(key_at(KvShape{2, 2, 128, 128, {}, {}}, KvType::F16, KvType::F16, 4, 16), r0);
}

// ---- on the GPU ----------------------------------------------------------------------------------

std::vector<int32_t> greedy(Model& model, KvSequence& kv, const std::vector<int32_t>& prompt, int n) {
  std::vector<int32_t> out;
  GenerateOptions go;
  go.n_predict = n;
  go.sampling.temperature = 0;
  GenerateCallbacks cb;
  cb.on_token = [&](int32_t id) {
    out.push_back(id);
    return true;
  };
  generate(model, kv, prompt, go, cb);
  return out;
}

std::string ids_text(const std::vector<int32_t>& v) {
  std::string s;
  for (int32_t t : v) s += std::to_string(t) + " ";
  return s;
}

TEST(CudaGraphKv, AFreshKvInAFreedKvsPlaceGetsItsOwnGraphs) {
  POLYKV_REQUIRE_GPU();
  auto backend = make_backend({"cuda", 0});
  auto model = Model::load(test::embedded_model(), *backend);
  const Tokenizer tok = Tokenizer::from_gguf(model->gguf());
  const std::vector<int32_t> prompt = tok.encode("def parse_config(path):\n    \"\"\"Read the file.\"\"\"\n", true, false);
  KvMemory& mem = backend->kv_memory();
  const int n_gen = 10, max_tokens = 256, bt = 32;  // 9 decode steps: eager, recorded, then replayed
  struct Types {
    KvType k, v;
  };
  const Types types[] = {{KvType::F16, KvType::F16}, {KvType::Q8_0, KvType::Q8_0}, {KvType::Q8_0, KvType::Turbo3T}};
  // References on KVs that live to the end of the test (their addresses are never reused).
  std::vector<std::unique_ptr<OwnedPagedKv>> keep;
  std::vector<std::vector<int32_t>> ref;
  for (const Types& t : types) {
    keep.push_back(std::make_unique<OwnedPagedKv>(model->kv_shape(), t.k, t.v, max_tokens, bt, mem));
    ref.push_back(greedy(*model, *keep.back(), prompt, n_gen));
    ASSERT_EQ(ref.back().size(), size_t(n_gen));
  }
  std::optional<OwnedPagedKv> slot;
  std::vector<void*> held;  // allocations holding freed KV bytes' places (the next KV's bytes land elsewhere)
  const void* slot_host = nullptr;
  int discriminating = 0;  // rounds with the same host address and other device bytes than the last round
  const uint8_t* last_data = nullptr;
  for (int round = 0; round < 7; ++round) {
    const size_t ti = size_t(round % 3);  // f16, q8_0, q8_0/turbo3t, f16, ...
    const Types t = types[ti];
    size_t bytes = 0;
    if (slot) {
      bytes = slot->allocated_bytes();
      slot.reset();
      // Odd rounds: the freed bytes are taken by another allocation (a stale replay then writes there:
      // no fault, wrong tokens; a few tries, the allocator usually hands the freed place back at once).
      // Even rounds: left free, so a stale replay may fault instead.
      if (round % 2 == 1)
        for (int k = 0; k < 4; ++k) {
          held.push_back(mem.allocate(bytes));
          if (held.back() == static_cast<const void*>(last_data)) break;
        }
    }
    slot.emplace(model->kv_shape(), t.k, t.v, max_tokens, bt, mem);
    const uint8_t* data = slot->block_store()->data();
    if (!slot_host) slot_host = &*slot;
    ASSERT_EQ(static_cast<const void*>(&*slot), slot_host);
    discriminating += round > 0 && data != last_data;
    last_data = data;
    SCOPED_TRACE("round " + std::to_string(round) + ", K/V " + kv_type_name(t.k) + "/" + kv_type_name(t.v));
    const std::vector<int32_t> got = greedy(*model, *slot, prompt, n_gen);
    EXPECT_EQ(got, ref[ti]) << "got  " << ids_text(got) << "\nwant " << ids_text(ref[ti]);
  }
  slot.reset();
  for (void* p : held) mem.release(p);
  std::printf("rounds whose KV bytes moved under the same host address: %d of 6\n", discriminating);
  EXPECT_GE(discriminating, 1) << "the test never put KV bytes elsewhere under one host address";
}

// The engine test of engine_cuda_test.cpp, repeated: Engines made one after the other in one storage
// (the same host address for their pools), pools of other sizes (their bytes elsewhere), other agent
// counts and suffix lengths. Every agent must run to its length; most must match their prompt run
// alone (the GPU's kernels are not batch-invariant, see engine_cuda_test.cpp).
TEST(CudaGraphKv, EnginesOneAfterAnotherOnOneModel) {
  POLYKV_REQUIRE_GPU();
  auto backend = make_backend({"cuda", 0});
  auto model = Model::load(test::embedded_model(), *backend);
  const Tokenizer tok = Tokenizer::from_gguf(model->gguf());
  const std::vector<int32_t> doc = tok.encode(
      "import json\n\nclass Store:\n    \"\"\"Keeps records in a file.\"\"\"\n\n    def __init__(self, path):\n"
      "        self.path = path\n        self.records = []\n\n",
      true, false);
  struct Round {
    int agents, kv_tokens, block_tokens;
  };
  const Round rounds[] = {{16, 8192, 32}, {5, 4096, 32}, {12, 6144, 32}, {16, 8192, 16}, {3, 2048, 32}};
  std::optional<Engine> slot;
  std::vector<std::vector<int32_t>> alone_cache(16);
  const int n_gen = 12;
  int r_i = 0;
  for (const Round& r : rounds) {
    SCOPED_TRACE("round " + std::to_string(r_i++) + ": " + std::to_string(r.agents) + " agents");
    EngineOptions o;
    o.parallel = 16;
    o.kv_tokens = r.kv_tokens;
    o.block_tokens = r.block_tokens;
    o.model_id = "embedded";
    std::vector<std::vector<int32_t>> suffixes;
    std::vector<std::unique_ptr<test::Collector>> cs;
    slot.emplace(*model, nullptr, o);
    slot->create_pool("doc", doc, "", "");
    for (int a = 0; a < r.agents; ++a) {
      // Suffixes of 1 to ~12 tokens: sequences cross block boundaries at different steps.
      std::string s = "\n    def m" + std::to_string(a) + "(self";
      for (int k = 0; k < a % 5; ++k) s += ", x" + std::to_string(k);
      s += "):\n";
      suffixes.push_back(tok.encode(s, false, false));
      cs.push_back(std::make_unique<test::Collector>());
      slot->submit(cs.back()->request(suffixes.back(), n_gen, "doc", /*ignore_eos=*/true));
    }
    for (auto& c : cs) c->wait();
    slot.reset();
    int same = 0;
    for (int a = 0; a < r.agents; ++a) {
      SCOPED_TRACE(a);
      ASSERT_EQ(cs[size_t(a)]->info.reason, FinishReason::Length) << cs[size_t(a)]->info.error;
      ASSERT_EQ(cs[size_t(a)]->ids.size(), size_t(n_gen));
      std::vector<int32_t>& alone = alone_cache[size_t(a)];
      if (alone.empty()) {
        std::vector<int32_t> full = doc;
        full.insert(full.end(), suffixes[size_t(a)].begin(), suffixes[size_t(a)].end());
        SequenceKvOptions ko;
        ko.max_tokens = 1024;
        auto kv = make_sequence_kv(*model, ko);
        alone = greedy(*model, *kv, full, n_gen);
      }
      same += alone == cs[size_t(a)]->ids;
    }
    std::printf("%d agents, pool of %d tokens in blocks of %d: %d match their prompt run alone\n", r.agents,
                r.kv_tokens, r.block_tokens, same);
    EXPECT_GE(same, (r.agents * 3 + 3) / 4);
  }
}

}  // namespace
}  // namespace polykv
