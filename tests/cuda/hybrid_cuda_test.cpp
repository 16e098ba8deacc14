// The Gated DeltaNet hybrid (qwen35 random fixture, ../shared/fixtures/models/random) on the CUDA
// backend: transformers' logits (the full 48 tokens in one pass; the 40-token prompt then 8 single-token
// steps, whose decode steps run eagerly, get recorded into a CUDA graph and replayed), the CPU backend's
// logits, two sequences sharing a prefix (KV blocks shared, state copied) in one batched step against
// each run alone, a speculative rollback (a 4-row verify step truncated to 2) against the plain run, and
// the engine's agents on a pool (its state checkpoint in device memory) against their prompts alone.
// Bounds (tests/hybrid_cuda_bounds.h): wrong hybrid features move log-probs by 0.6 to 12 (fixtures
// README). The CUDA prefill's f16 activations alone move this fixture by 0.069 (CPU emulation), so
// against transformers and the plain CPU the bound is 0.1; against the CPU backend with the same
// roundings (test::CudaRoundingBackend) only summation order is left: 1e-2. Figures are printed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "backend/backend.h"
#include "core/error.h"
#include "cuda_test_util.h"
#include "engine/engine.h"
#include "engine/generate.h"
#include "engine/sequence_kv.h"
#include "kv/kv_block_store.h"
#include "kv/paged_kv.h"
#include "kv/recurrent_state.h"
#include "model/model.h"
#include "../engine_test_util.h"
#include "../cuda_rounding_backend.h"
#include "../hybrid_cuda_bounds.h"
#include "../test_util.h"

namespace polykv {
namespace {

constexpr int kVocab = 8000, kPositions = 48, kPrompt = 40;

// Hybrids on CUDA are opt-in (model/moe_ffn.cpp check_backend_runs): each test opts in for its own body
// (not at static initialization, which would opt in every test of the binary).
struct HybridOptIn {
  HybridOptIn() { setenv("POLYKV_CUDA_HYBRID", "1", 1); }
  ~HybridOptIn() { unsetenv("POLYKV_CUDA_HYBRID"); }
};

std::string dir() { return test::fixtures_dir() + "/models/random"; }

std::vector<int32_t> ids() {
  std::ifstream in(dir() + "/qwen35.ref.json");
  return nlohmann::json::parse(in)["ref"]["ids"].get<std::vector<int32_t>>();
}

struct Diff {
  double max_logprob = 0;  // max |log-softmax difference|
  int top1 = 0, rows = 0;
  int worst_row = -1;
};

Diff compare(const std::vector<float>& got, const std::vector<float>& ref) {
  Diff d;
  d.rows = int(ref.size() / kVocab);
  for (int t = 0; t < d.rows; ++t) {
    const float* g = got.data() + size_t(t) * kVocab;
    const float* r = ref.data() + size_t(t) * kVocab;
    d.top1 += std::max_element(g, g + kVocab) - g == std::max_element(r, r + kVocab) - r;
    double mg = -INFINITY, mr = -INFINITY, sg = 0, sr = 0;
    for (int i = 0; i < kVocab; ++i) {
      if (!std::isfinite(g[i])) {
        d.max_logprob = INFINITY;
        d.worst_row = t;
        return d;
      }
      mg = std::max(mg, double(g[i])), mr = std::max(mr, double(r[i]));
    }
    for (int i = 0; i < kVocab; ++i) sg += std::exp(g[i] - mg), sr += std::exp(r[i] - mr);
    const double lg = mg + std::log(sg), lr = mr + std::log(sr);
    for (int i = 0; i < kVocab; ++i) {
      const double e = std::abs((g[i] - lg) - (r[i] - lr));
      if (e > d.max_logprob) d.max_logprob = e, d.worst_row = t;
    }
  }
  return d;
}

void report(const char* what, const Diff& d) {
  std::printf("  %s: max |d logprob| %.3g (worst row %d), top-1 %d/%d\n", what, d.max_logprob, d.worst_row, d.top1,
              d.rows);
}

SequenceKvOptions kv_options(const char* type) {
  SequenceKvOptions o;
  o.k_type = o.v_type = type;
  o.max_tokens = 128;
  o.block_tokens = 16;
  return o;
}

// Full pass and prompt + single steps of the fixture's ids on `model`.
std::pair<std::vector<float>, std::vector<float>> run(Model& model, const char* kv_type) {
  const auto t = ids();
  std::vector<float> full(size_t(kPositions) * kVocab, NAN), inc(full.size(), NAN);
  {
    auto kv = make_sequence_kv(model, kv_options(kv_type));
    model.forward(t, *kv, full.data(), true);
  }
  auto kv = make_sequence_kv(model, kv_options(kv_type));
  model.forward(std::span(t).first(kPrompt), *kv, inc.data(), true);
  for (int i = kPrompt; i < kPositions; ++i) {
    std::fprintf(stderr, "[qwen35 cuda] decode step %d\n", i - kPrompt);
    model.forward(std::span(t).subspan(size_t(i), 1), *kv, inc.data() + size_t(i) * kVocab, false);
  }
  return {full, inc};
}

TEST(HybridCuda, Qwen35MatchesTransformersAndTheCpu) {
  POLYKV_REQUIRE_GPU();
  const HybridOptIn opt_in;
  POLYKV_REQUIRE_FIXTURE_MODEL_OR_SKIP("qwen35");
  auto gpu = make_backend({"cuda", 0});
  auto cpu = make_backend({"cpu", 2});
  test::CudaRoundingBackend emu(make_backend({"cpu", 2}), /*round_prefill=*/true);
  auto gm = Model::load(dir() + "/qwen35.gguf", *gpu);
  auto cm = Model::load(dir() + "/qwen35.gguf", *cpu);
  auto em = Model::load(dir() + "/qwen35.gguf", emu);
  const auto ref_full = test::read_f32(dir() + "/qwen35.logits_full.f32");
  const auto ref_inc = test::read_f32(dir() + "/qwen35.logits_kvcache.f32");
  for (const char* type : {"f32", "f16"}) {
    SCOPED_TRACE(type);
    std::printf("qwen35 on CUDA, %s KV\n", type);
    const auto [gf, gi] = run(*gm, type);
    const auto [cf, ci] = run(*cm, type);
    const auto [ef, ei] = run(*em, type);
    const Diff a = compare(gf, ref_full), b = compare(gi, ref_inc), c = compare(gf, cf), e = compare(gi, ci);
    const Diff f = compare(gf, ef), g = compare(gi, ei);
    report("GPU full pass vs transformers", a);
    report("GPU prompt + decode vs transformers", b);
    report("GPU full pass vs CPU backend", c);
    report("GPU prompt + decode vs CPU backend", e);
    report("GPU full pass vs CPU with the GPU's roundings", f);
    report("GPU prompt + decode vs CPU with the GPU's roundings", g);
    const double bound = std::string(type) == "f32" ? test::kHybridCudaF32Bound : test::kHybridCudaF16Bound;
    EXPECT_LE(a.max_logprob, bound);
    EXPECT_LE(b.max_logprob, bound);
    EXPECT_LE(c.max_logprob, bound);
    EXPECT_LE(e.max_logprob, bound);
    EXPECT_LE(f.max_logprob, test::kHybridCudaVsEmulationBound);
    EXPECT_LE(g.max_logprob, test::kHybridCudaVsEmulationBound);
    EXPECT_GE(a.top1, kPositions - 2);
    EXPECT_GE(b.top1, kPositions - 2);
  }
}

// Relative L2 error of one logits row.
double rel_l2(const float* got, const float* want) { return cuda_test::rel_l2(got, want, size_t(kVocab)); }

// Two sequences share a 32-token prefix (its two KV blocks, and B's state is a copy of A's at 32), then
// run their own suffixes in one batched step and one more batched decode step: each gets the logits
// it gets alone.
TEST(HybridCuda, SequencesSharingAPrefixMatchThemselvesAlone) {
  POLYKV_REQUIRE_GPU();
  const HybridOptIn opt_in;
  POLYKV_REQUIRE_FIXTURE_MODEL_OR_SKIP("qwen35");
  auto gpu = make_backend({"cuda", 0});
  auto model = Model::load(dir() + "/qwen35.gguf", *gpu);
  const auto t = ids();
  const std::vector<int32_t> prefix(t.begin(), t.begin() + 32);
  const std::vector<int32_t> sa(t.begin() + 32, t.begin() + 37), sb(t.begin() + 35, t.begin() + 44);  // 5, 9 rows
  const int32_t next_a = t[40], next_b = t[45];

  KvBlockStore store(model->kv_shape(), KvType::F16, KvType::F16, 16, 16, gpu->kv_memory());
  PagedKv a(store, 128), b(store, 128);
  const std::vector<BlockId> ta = {0, 1, 2, 3, 4}, tb = {0, 1, 5, 6, 7};
  a.set_blocks(ta);
  b.set_blocks(tb);
  model->forward(prefix, a, nullptr, false);
  b.recurrent_state()->copy_from(*a.recurrent_state());  // the fork: shared blocks, copied state
  b.reset(32);
  std::vector<float> la((sa.size() + 1) * kVocab), lb((sb.size() + 1) * kVocab);
  {
    const Model::BatchSeq batch[2] = {{sa, &a, la.data(), true}, {sb, &b, lb.data(), true}};
    model->forward_batch(batch);
  }
  {
    const Model::BatchSeq batch[2] = {{std::span(&next_a, 1), &a, la.data() + sa.size() * kVocab, false},
                                      {std::span(&next_b, 1), &b, lb.data() + sb.size() * kVocab, false}};
    model->forward_batch(batch);
  }
  auto alone = [&](const std::vector<int32_t>& sfx, int32_t next) {
    auto kv = make_sequence_kv(*model, kv_options("f16"));
    std::vector<float> l((sfx.size() + 1) * kVocab);
    model->forward(prefix, *kv, nullptr, false);
    model->forward(sfx, *kv, l.data(), true);
    model->forward(std::span(&next, 1), *kv, l.data() + sfx.size() * kVocab, false);
    return l;
  };
  const auto ra = alone(sa, next_a), rb = alone(sb, next_b);
  for (auto [got, want, what] : {std::tuple{&la, &ra, "A"}, std::tuple{&lb, &rb, "B"}}) {
    double worst = 0;
    int worst_row = -1, top1 = 0;
    const int rows = int(want->size() / kVocab);
    for (int r = 0; r < rows; ++r) {
      const float* g = got->data() + size_t(r) * kVocab;
      const float* w = want->data() + size_t(r) * kVocab;
      const double e = rel_l2(g, w);
      if (!(e <= worst)) worst = e, worst_row = r;
      top1 += std::max_element(g, g + kVocab) - g == std::max_element(w, w + kVocab) - w;
    }
    std::printf("  sequence %s sharing the prefix vs alone: worst relative L2 %.3g (row %d of %d), top-1 %d/%d\n", what,
                worst, worst_row, rows, top1, rows);
    EXPECT_LT(worst, 1e-2) << what << " row " << worst_row;
    EXPECT_GE(top1, rows - 1) << what;  // one near-tie may flip (the batched step takes cuBLAS, alone mat-vec)
  }
}

// Speculative rollback: after a 4-row verify step, truncate to 2 of them (the device replays the
// state), then one token: the logits of a run that took only those 2 rows.
TEST(HybridCuda, RollbackInsideAVerifyStepMatchesThePlainRun) {
  POLYKV_REQUIRE_GPU();
  const HybridOptIn opt_in;
  POLYKV_REQUIRE_FIXTURE_MODEL_OR_SKIP("qwen35");
  auto gpu = make_backend({"cuda", 0});
  auto model = Model::load(dir() + "/qwen35.gguf", *gpu);
  const auto t = ids();
  const std::span<const int32_t> prompt = std::span(t).first(kPrompt);
  const std::vector<int32_t> draft = {t[40], t[41], 17, 4242};
  const int32_t next = t[42];
  std::vector<float> l1(kVocab), l2(kVocab), verify(4 * size_t(kVocab));
  auto kv1 = make_sequence_kv(*model, kv_options("f16"));
  model->forward(prompt, *kv1, nullptr, false);
  model->forward(draft, *kv1, verify.data(), true);
  truncate_sequence_kv(*kv1, kPrompt + 2);
  model->forward(std::span(&next, 1), *kv1, l1.data(), false);
  auto kv2 = make_sequence_kv(*model, kv_options("f16"));
  model->forward(prompt, *kv2, nullptr, false);
  model->forward(std::span(draft).first(2), *kv2, nullptr, false);
  model->forward(std::span(&next, 1), *kv2, l2.data(), false);
  const double e = rel_l2(l1.data(), l2.data());
  std::printf("  rollback 4 -> 2 rows then 1 token vs the plain run: relative L2 %.3g (bit-identical: %s)\n", e,
              std::equal(l1.begin(), l1.end(), l2.begin()) ? "yes" : "no");
  EXPECT_LT(e, 1e-4);
  EXPECT_THROW(truncate_sequence_kv(*kv1, kPrompt - 5), Error);  // before the last step: the state is gone
}

// The engine on the GPU: a named pool (KV blocks in GPU memory, its state checkpoint in device memory)
// and agents forked from it (a device copy of the state each), batched with each other. Every agent
// runs to its length with the pool's tokens cached; greedy tokens are compared with each prompt run
// alone on the GPU (the GPU is not batch-invariant across matmul paths, so near-ties may flip: most,
// not all, must match; a wrong state flips nearly all).
TEST(HybridCuda, EngineAgentsOnOnePoolMatchTheirPromptsAlone) {
  POLYKV_REQUIRE_GPU();
  const HybridOptIn opt_in;
  POLYKV_REQUIRE_FIXTURE_MODEL_OR_SKIP("qwen35");
  auto gpu = make_backend({"cuda", 0});
  auto model = Model::load(dir() + "/qwen35.gguf", *gpu);
  const auto t = ids();
  const std::vector<int32_t> doc(t.begin(), t.begin() + 40);
  EngineOptions o;
  o.parallel = 8;
  o.kv_tokens = 4096;
  o.block_tokens = 16;
  o.n_ctx = 256;
  o.k_type = o.v_type = "f16";
  o.model_id = "qwen35";
  const int n_agents = 8, n_gen = 6;
  std::vector<std::vector<int32_t>> suffixes;
  std::vector<std::unique_ptr<test::Collector>> cs;
  {
    Engine engine(*model, [](int32_t) { return false; }, o);
    engine.create_pool("doc", doc, "", "");
    for (int a = 0; a < n_agents; ++a) {
      std::vector<int32_t> sfx;
      for (int i = 0; i < 3 + 5 * a; ++i) sfx.push_back(int32_t((37 + 101 * a + 13 * i) % kVocab));  // 3 .. 38 rows
      suffixes.push_back(sfx);
      cs.push_back(std::make_unique<test::Collector>());
      engine.submit(cs.back()->request(sfx, n_gen, "doc", /*ignore_eos=*/true));
    }
    for (auto& c : cs) c->wait();
  }
  int same = 0;
  for (int a = 0; a < n_agents; ++a) {
    SCOPED_TRACE(a);
    EXPECT_EQ(cs[size_t(a)]->info.reason, FinishReason::Length) << cs[size_t(a)]->info.error;
    EXPECT_EQ(cs[size_t(a)]->info.cached_tokens, int(doc.size()));
    ASSERT_EQ(cs[size_t(a)]->ids.size(), size_t(n_gen));
    std::vector<int32_t> full = doc;
    full.insert(full.end(), suffixes[size_t(a)].begin(), suffixes[size_t(a)].end());
    auto kv = make_sequence_kv(*model, kv_options("f16"));
    std::vector<int32_t> alone;
    GenerateOptions go;
    go.n_predict = n_gen;
    go.sampling.temperature = 0;
    GenerateCallbacks cb;
    cb.on_token = [&](int32_t id) {
      alone.push_back(id);
      return true;
    };
    generate(*model, *kv, full, go, cb);
    same += alone == cs[size_t(a)]->ids;
  }
  std::printf("  hybrid agents whose %d greedy tokens equal their prompt run alone on the GPU: %d of %d\n", n_gen, same,
              n_agents);
  EXPECT_GE(same, n_agents * 3 / 4);
}

}  // namespace
// Automatic prefix caching of a hybrid model on the GPU: the state checkpoints live in device memory
// (KvMemory::copy on the stream). A repeated prompt hits its last full block and generates the same tokens;
// a second prompt on the same document hits the first one's checkpoint and generates what it generates on a
// fresh engine (the same chunk ends); `bench --depth` rewinds through a state copy in device memory.
TEST(HybridCuda, EnginePrefixCacheHitsStateCheckpoints) {
  POLYKV_REQUIRE_GPU();
  const HybridOptIn opt_in;
  POLYKV_REQUIRE_FIXTURE_MODEL_OR_SKIP("qwen35");
  auto gpu = make_backend({"cuda", 0});
  auto model = Model::load(dir() + "/qwen35.gguf", *gpu);
  EngineOptions o;
  o.parallel = 4;
  o.kv_tokens = 4096;
  o.block_tokens = 16;
  o.step_tokens = 24;
  o.n_ctx = 256;
  o.k_type = "q8_0";
  o.v_type = "turbo3t";
  o.model_id = "qwen35";
  o.check_invariants = true;
  std::vector<int32_t> doc;
  for (int i = 0; i < 50; ++i) doc.push_back(int32_t((17 + 131 * i + i * i) % kVocab));
  auto with = [&](std::vector<int32_t> a, int salt, int n) {
    for (int i = 0; i < n; ++i) a.push_back(int32_t((29 + 7919 * salt + 37 * i) % kVocab));
    return a;
  };
  const auto q1 = with(doc, 1, 7), q2 = with(doc, 2, 9);
  auto run = [&](Engine& e, const std::vector<int32_t>& p, test::Collector& c) {
    e.submit(c.request(p, 6, "", /*ignore_eos=*/true));
    c.wait();
    EXPECT_EQ(c.info.reason, FinishReason::Length) << c.info.error;
  };
  test::Collector a1, a2, b, fresh_b;
  {
    Engine engine(*model, [](int32_t) { return false; }, o);
    run(engine, q1, a1);
    run(engine, q1, a2);
    run(engine, q2, b);
    EXPECT_EQ(engine.metrics().state_checkpoints, 4);  // 16, 32, 48 (q1's last full block), 64 (q2's decode)
  }
  {
    Engine engine(*model, [](int32_t) { return false; }, o);
    run(engine, q2, fresh_b);
  }
  EXPECT_EQ(a1.info.cached_tokens, 0);
  EXPECT_EQ(a2.info.cached_tokens, 48);
  EXPECT_EQ(a2.ids, a1.ids);
  EXPECT_EQ(b.info.cached_tokens, 48);
  EXPECT_EQ(fresh_b.info.cached_tokens, 0);
  EXPECT_EQ(b.ids, fresh_b.ids);
  const test::CliResult r = test::polykv("bench -m " + dir() + "/qwen35.gguf --device cuda -d 40 -p 8 -n 4 -r 2 --bandwidth 1000 --json");
  EXPECT_EQ(r.code, 0) << r.out;
}

}  // namespace polykv
