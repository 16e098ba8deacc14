// The qwen35 / qwen35moe fixtures' MTP head (nextn block: gated attention over its own KV) on the CUDA
// backend: the main model's hidden states of the 47 rows, then the head, against the CPU backend with the
// CUDA backend's roundings (test::CudaRoundingBackend: what is left is summation order) and against the
// fixture's mtp_ref (top-1 per row; the CPU matches all 47, tests/mtp_fixture_test.cpp). Figures printed.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "../cuda_rounding_backend.h"
#include "../test_util.h"
#include "backend/backend.h"
#include "cuda_test_util.h"
#include "core/error.h"
#include "engine/sequence_kv.h"
#include "kv/kv_cache.h"
#include "kv/owned_paged_kv.h"
#include "model/model.h"
#include "model/mtp_head.h"

namespace polykv {
namespace {

struct HybridOptIn {  // hybrids on CUDA may be opt-in (model/moe_ffn.cpp check_backend_runs)
  HybridOptIn() { setenv("POLYKV_CUDA_HYBRID", "1", 1); }
  ~HybridOptIn() { unsetenv("POLYKV_CUDA_HYBRID"); }
};

// The head's logits [rows][V] for the fixture's ids on `be`.
std::vector<float> head_logits(Backend& be, const std::string& path, const std::vector<int32_t>& ids, int rows) {
  auto model = Model::load(path, be);
  auto head = MtpHead::load(*model);
  check(head != nullptr, "the fixture has no nextn block");
  const int E = model->config().n_embd, V = model->config().n_vocab;
  std::vector<float> hidden(size_t(rows) * E);
  SequenceKvOptions o;
  o.k_type = o.v_type = "f32";
  o.max_tokens = 64;
  o.block_tokens = 16;
  auto tkv = make_sequence_kv(*model, o);
  const Model::BatchSeq s{std::span(ids).first(size_t(rows)), tkv.get(), nullptr, false, hidden.data()};
  model->forward_batch(std::span(&s, 1));
  // The head's KV: one layer, in the backend's KV memory (a paged sequence on a device backend).
  auto hkv = be.kv_memory().host_accessible()
                 ? std::unique_ptr<KvSequence>(new KvCache(head->kv_shape(), KvType::F32, KvType::F32, 64))
                 : std::unique_ptr<KvSequence>(
                       new OwnedPagedKv(head->kv_shape(), KvType::F32, KvType::F32, 64, 16, be.kv_memory()));
  std::vector<float> logits(size_t(rows) * V);
  head->forward(std::span(ids).subspan(1, size_t(rows)), hidden.data(), *hkv, logits.data(), nullptr);
  return logits;
}

TEST(HybridMtpCuda, HeadMatchesTheCpuAndMtpRef) {
  POLYKV_REQUIRE_GPU();
  const HybridOptIn opt_in;
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  for (const std::string name : {"qwen35", "qwen35moe"}) {
    SCOPED_TRACE(name);
    const std::string path = test::fixtures_dir() + "/models/random/" + name + ".gguf";
    std::ifstream in(test::fixtures_dir() + "/models/random/" + name + ".ref.json");
    if (!in.good() || !std::ifstream(path).good()) {  // a GPU machine may carry only some fixtures
      std::printf("  %s: fixture absent, skipped\n", name.c_str());
      continue;
    }
    const nlohmann::json j = nlohmann::json::parse(in);
    const auto ids = j["ref"]["ids"].get<std::vector<int32_t>>();
    const auto argmax = j["mtp_ref"]["argmax"].get<std::vector<int>>();
    const int rows = int(ids.size()) - 1, V = 8000;
    auto gpu = make_backend({"cuda", 0});
    test::CudaRoundingBackend emu(make_backend({"cpu", 2}), /*round_prefill=*/true);
    const auto g = head_logits(*gpu, path, ids, rows), c = head_logits(emu, path, ids, rows);
    double worst = 0;
    int worst_row = -1, top1_ref = 0, top1_cpu = 0;
    for (int t = 0; t < rows; ++t) {
      const float* gr = g.data() + size_t(t) * V;
      const float* cr = c.data() + size_t(t) * V;
      double e2 = 0, r2 = 0;
      for (int i = 0; i < V; ++i) e2 += (double(gr[i]) - cr[i]) * (double(gr[i]) - cr[i]), r2 += double(cr[i]) * cr[i];
      const double e = std::isfinite(e2) ? std::sqrt(e2 / std::max(r2, 1e-30)) : INFINITY;
      if (!(e <= worst)) worst = e, worst_row = t;
      const int ga = int(std::max_element(gr, gr + V) - gr);
      top1_ref += ga == argmax[size_t(t)];
      top1_cpu += ga == int(std::max_element(cr, cr + V) - cr);
    }
    std::printf("  %s MTP head on CUDA: vs the emulating CPU worst relative L2 %.3g (row %d), top-1 %d/%d; "
                "top-1 vs mtp_ref %d/%d\n",
                name.c_str(), worst, worst_row, top1_cpu, rows, top1_ref, rows);
    // Without the rounding emulated (the plain CPU) these are 9.8e-3 and 0.10 (a route flip in qwen35moe,
    // whose experts' rounding is not emulated).
    EXPECT_LE(worst, name == "qwen35" ? 2e-2 : 0.3) << "row " << worst_row;
    EXPECT_GE(top1_cpu, rows - 2);
    EXPECT_GE(top1_ref, rows - 3);  // the GPU's f16 prefill rounding may flip a near tie or two
  }
}

}  // namespace
}  // namespace polykv
