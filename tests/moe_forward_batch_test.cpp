// The MoE fixtures (qwen3moe, gpt-oss) through Model::forward_batch: each sequence's logits are
// bit-identical to the same tokens run alone through a private KvCache, whatever the batch and the
// chunks (the experts group rows of all sequences of a step, model/moe_ffn.h). And a backend without
// the MoE ops refuses such a model at load with a clear error.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend_test_util.h"
#include "core/error.h"
#include "kv/kv_block_store.h"
#include "kv/paged_kv.h"
#include "model/model.h"
#include "test_util.h"

namespace polykv {
namespace {

std::string fixture(const std::string& name) { return test::fixtures_dir() + "/models/random/" + name + ".gguf"; }

std::vector<int32_t> ids(int n, int seed) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[size_t(i)] = 3 + (seed * 131 + i * 37 + (i * i) % 11) % 7000;
  return v;
}

std::vector<float> alone(Model& m, const std::vector<int32_t>& tokens, KvType kt, KvType vt, int chunk) {
  const int V = m.config().n_vocab;
  KvCache kv(m.kv_shape(), kt, vt, 1024, 16);
  std::vector<float> out(tokens.size() * size_t(V));
  for (size_t p = 0; p < tokens.size(); p += size_t(chunk)) {
    const size_t n = std::min(tokens.size() - p, size_t(chunk));
    m.forward(std::span(tokens).subspan(p, n), kv, out.data() + p * size_t(V), true);
  }
  return out;
}

class MoeForwardBatch : public testing::TestWithParam<std::string> {};

TEST_P(MoeForwardBatch, EachSequenceMatchesItsRunAlone) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  CpuBackend backend(2);
  auto model = Model::load(fixture(GetParam()), backend);
  const KvType kt = KvType::Q8_0, vt = KvType::Turbo3T;
  const int V = model->config().n_vocab, bt = 16;
  KvBlockStore store(model->kv_shape(), kt, vt, 64, bt);
  const std::vector<std::vector<int32_t>> toks = {ids(40, 1), ids(23, 2), ids(57, 3)};
  std::vector<std::vector<float>> ref;
  for (const auto& t : toks) ref.push_back(alone(*model, t, kt, vt, 7));

  std::vector<PagedKv> kv;
  std::vector<std::vector<BlockId>> tables(3);
  BlockId next = 0;
  for (size_t s = 0; s < 3; ++s) {
    kv.emplace_back(store, 1024);
    for (size_t b = 0; b < (toks[s].size() + bt - 1) / bt; ++b) tables[s].push_back(next++);
    kv[s].set_blocks(tables[s]);
  }
  std::vector<std::vector<float>> got(3);
  for (size_t s = 0; s < 3; ++s) got[s].assign(toks[s].size() * size_t(V), 0.0f);
  const int chunks[3] = {5, 1, 13};
  std::vector<size_t> done(3, 0);
  while (done[0] < toks[0].size() || done[1] < toks[1].size() || done[2] < toks[2].size()) {
    std::vector<Model::BatchSeq> batch;
    for (size_t s = 0; s < 3; ++s) {
      if (done[s] == toks[s].size()) continue;
      const size_t n = std::min(toks[s].size() - done[s], size_t(chunks[s]));
      batch.push_back({std::span(toks[s]).subspan(done[s], n), &kv[s], got[s].data() + done[s] * size_t(V), true});
      done[s] += n;
    }
    model->forward_batch(batch);
  }
  for (size_t s = 0; s < 3; ++s) {
    SCOPED_TRACE(s);
    EXPECT_EQ(0, std::memcmp(got[s].data(), ref[s].data(), got[s].size() * sizeof(float))) << "not bit-identical";
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MoeForwardBatch, testing::Values("qwen3moe", "gptoss"));

TEST(MoeBackend, DeviceBackendRefusesAtLoad) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  for (const char* name : {"qwen3moe", "gptoss"}) {
    test::CountingBackend be(1, DeviceKind::Cuda);
    try {
      Model::load(fixture(name), be);
      ADD_FAILURE() << name << " loaded on a backend without the MoE ops";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("does not run"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("--device cpu"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace polykv
