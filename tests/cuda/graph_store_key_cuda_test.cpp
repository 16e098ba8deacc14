// A recorded decode step must not replay over another KV pool that happens to sit at the same host
// address. The CUDA backend keys its graphs by the step's shape and, until 2026-12-01e, by the pool's
// host address only; the kernels it records bake in the pool's device address and KV types. A sequence's
// OwnedPagedKv freed and a new one made (another KV type, another device allocation) at the same host
// address then replayed the old graph: the qwen35 test's f16 KV decode after its f32 run gave
// max |d log-prob| 4.64 (H200, 2026-12-01d). Here the second sequence is built in the very storage of the
// first (std::optional), so the host address is the same by construction, and its decode logits must
// equal those of a backend that never saw the first.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "../test_util.h"
#include "backend/backend.h"
#include "cuda_test_util.h"
#include "kv/owned_paged_kv.h"
#include "model/model.h"

namespace polykv {
namespace {

struct HybridOptIn {  // hybrids on CUDA may be opt-in (model/moe_ffn.cpp check_backend_runs)
  HybridOptIn() { setenv("POLYKV_CUDA_HYBRID", "1", 1); }
  ~HybridOptIn() { unsetenv("POLYKV_CUDA_HYBRID"); }
};

// Prompt then `steps` single-token decode steps (eager, recorded, replayed); the decode steps' logits.
std::vector<float> decode(Model& m, KvSequence& kv, const std::vector<int32_t>& prompt, int steps) {
  const int V = m.config().n_vocab;
  std::vector<float> out(size_t(steps) * V);
  m.forward(prompt, kv, nullptr, false);
  for (int i = 0; i < steps; ++i) {
    const int32_t tok = int32_t((11 + 37 * i) % V);
    m.forward(std::span(&tok, 1), kv, out.data() + size_t(i) * V, false);
  }
  return out;
}

// Max |d logit| of got against want, with the decode step of the worst.
double worst_diff(const std::vector<float>& got, const std::vector<float>& want, int V, int& step) {
  double worst = 0;
  step = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = std::isfinite(got[i]) ? std::abs(double(got[i]) - want[i]) : INFINITY;
    if (!(e <= worst)) worst = e, step = int(i) / V;
  }
  return worst;
}

void check_model(const std::string& path) {
  SCOPED_TRACE(path);
  const std::vector<int32_t> prompt = {1, 17, 42, 99, 7, 300, 5, 64, 12, 8, 250, 31};
  constexpr int kSteps = 5;
  auto fresh = [&](KvType t) {  // on a backend that never recorded anything
    auto be = make_backend({"cuda", 0});
    auto m = Model::load(path, *be);
    OwnedPagedKv kv(m->kv_shape(), t, t, 64, 16, be->kv_memory());
    return decode(*m, kv, prompt, kSteps);
  };
  const std::vector<float> fresh16 = fresh(KvType::F16), fresh32 = fresh(KvType::F32);
  // One backend: f16, then f32, then f16 again, each sequence built in the same storage. Whichever of
  // the later two meets an equal key (the scratch may or may not grow in between) replays a graph
  // recorded for the other KV type unless the key covers the pool itself.
  auto be = make_backend({"cuda", 0});
  auto m = Model::load(path, *be);
  const int V = m->config().n_vocab;
  std::optional<OwnedPagedKv> kv;
  std::vector<std::vector<float>> got;
  for (const KvType t : {KvType::F16, KvType::F32, KvType::F16}) {
    kv.reset();
    kv.emplace(m->kv_shape(), t, t, 64, 16, be->kv_memory());  // the same host address each time
    got.push_back(decode(*m, *kv, prompt, kSteps));
  }
  kv.reset();
  const char* what[] = {"f16 first", "f32 after f16", "f16 after f32"};
  for (int i = 0; i < 3; ++i) {
    int step = -1;
    const double e = worst_diff(got[size_t(i)], i == 1 ? fresh32 : fresh16, V, step);
    std::printf("  %s: %s at the same host address vs a fresh backend: max |d logit| %.3g (decode step %d)\n",
                path.c_str(), what[i], e, step);
    EXPECT_LE(e, 1e-4) << what[i] << ", decode step " << step;
  }
}

TEST(CudaGraphStoreKey, AnotherPoolAtTheSameHostAddressDoesNotReplayTheOldGraph) {
  POLYKV_REQUIRE_GPU();
  check_model(test::embedded_model());
  POLYKV_REQUIRE_FIXTURE_MODEL_OR_SKIP("qwen35");
  const HybridOptIn opt_in;
  check_model(test::fixtures_dir() + "/models/random/qwen35.gguf");
}

}  // namespace
}  // namespace polykv
