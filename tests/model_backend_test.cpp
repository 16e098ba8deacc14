// The model runs through the Backend seam and only through it: the ops it calls per forward pass,
// a device-style backend (unpacked weights, logits through the workspace and download()) giving the
// CPU backend's logits bit for bit, and the one-call-at-a-time rule of a model's workspace.
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

std::vector<int32_t> ids(int n, int seed, int n_vocab) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[size_t(i)] = 3 + (seed * 131 + i * 37 + (i * i) % 11) % (n_vocab - 3);
  return v;
}

// All logits of `tokens`: a prefill chunk of 9, then one token at a time.
std::vector<float> run(Model& m, const std::vector<int32_t>& tokens) {
  const size_t V = size_t(m.config().n_vocab);
  KvCache kv(m.kv_shape(), KvType::Q8_0, KvType::Turbo3T, 64, 16);
  std::vector<float> out(tokens.size() * V);
  m.forward(std::span(tokens).first(9), kv, out.data(), true);
  for (size_t t = 9; t < tokens.size(); ++t) m.forward(std::span(tokens).subspan(t, 1), kv, out.data() + t * V, false);
  return out;
}

TEST(ModelSeam, EveryWeightUploadedAndEveryOpThroughTheBackend) {
  test::CountingBackend b(2);
  auto model = Model::load(test::embedded_model(), b);
  const ModelConfig& c = model->config();
  const bool tied = model->weights().output.data == model->weights().token_embd.data;
  EXPECT_EQ(b.calls["upload_matrix"], 7 * c.n_layer + (tied ? 1 : 2));
  EXPECT_GE(b.calls["upload_floats"], 2 * c.n_layer + 1);  // norms and RoPE frequencies at least

  b.calls.clear();
  KvCache kv(model->kv_shape(), KvType::F16, KvType::F16, 32);
  const std::vector<int32_t> toks = ids(6, 1, c.n_vocab);
  std::vector<float> logits(size_t(c.n_vocab));
  model->forward(toks, kv, logits.data(), false);
  EXPECT_EQ(b.calls["upload"], 1);  // tokens, positions and logit rows at once
  EXPECT_EQ(b.calls["begin_step"], 1);
  EXPECT_EQ(b.calls["embed"], 1);
  EXPECT_EQ(b.calls["matmul"], 7 * c.n_layer + 1);
  EXPECT_EQ(b.calls["store_kv"], c.n_layer);
  EXPECT_EQ(b.calls["attention"], c.n_layer);
  EXPECT_EQ(b.calls["rope"], 2 * c.n_layer);
  EXPECT_EQ(b.calls["gather_rows"], 1);
  EXPECT_EQ(b.calls["allocate"], 1);  // the workspace, once

  // The same logits as on a plain CpuBackend.
  CpuBackend cpu(1);
  auto ref = Model::load(test::embedded_model(), cpu);
  KvCache kv2(ref->kv_shape(), KvType::F16, KvType::F16, 32);
  std::vector<float> want(logits.size());
  ref->forward(toks, kv2, want.data(), false);
  EXPECT_EQ(0, std::memcmp(logits.data(), want.data(), logits.size() * sizeof(float)));

  // A decode step reuses the workspace: no allocation.
  b.calls.clear();
  model->forward(std::span(toks).first(1), kv, logits.data(), false);
  EXPECT_EQ(b.calls["allocate"], 0);
}

// A backend that says it is a GPU: the model binds unpacked weights, and logits come back through
// the workspace and download(). Over every architecture family of the fixtures (f16 weights, which
// the CPU never repacks), the logits equal the CPU backend's bit for bit.
TEST(ModelSeam, DeviceStylePathMatchesCpu) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  for (const char* name : {"llama3_gqa", "qwen2", "qwen3", "gemma2", "gemma3"}) {
    SCOPED_TRACE(name);
    const std::string path = test::fixtures_dir() + "/models/random/" + name + ".gguf";
    CpuBackend cpu(2);
    test::CountingBackend dev(2, DeviceKind::Cuda);
    auto a = Model::load(path, cpu);
    auto b = Model::load(path, dev);
    const std::vector<int32_t> toks = ids(24, 2, a->config().n_vocab);
    const std::vector<float> want = run(*a, toks);
    const std::vector<float> got = run(*b, toks);
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float))) << name;
    EXPECT_EQ(dev.calls["download"], int(toks.size()) - 9 + 1);
  }
}

// A KvSequence that, while the model stores into it, calls the model again (as a second thread
// would at that moment): the model must refuse, not run two passes over one workspace.
class ReentrantKv final : public KvSequence {
 public:
  ReentrantKv(Model& m, KvCache& inner) : m_(m), inner_(inner) {}
  int n_tokens() const override { return inner_.n_tokens(); }
  int max_tokens() const override { return inner_.max_tokens(); }
  void store(int layer, int pos, int n, const float* k, const float* v, ThreadPool* pool) override {
    if (layer == 0 && !tried) {
      tried = true;
      KvCache other(m_.kv_shape(), KvType::F16, KvType::F16, 8);
      const int32_t tok = 5;
      try {
        m_.forward(std::span(&tok, 1), other, nullptr, false);
      } catch (const Error& e) {
        error = e.what();
      }
    }
    inner_.store(layer, pos, n, k, v, pool);
  }
  void commit(int n) override { inner_.commit(n); }
  KvLayerView view(int layer) const override { return inner_.view(layer); }
  KEqualizer& k_equalizer() override { return inner_.k_equalizer(); }

  bool tried = false;
  std::string error;

 private:
  Model& m_;
  KvCache& inner_;
};

TEST(ModelSeam, ASecondCallWhileOneRunsIsRefused) {
  CpuBackend cpu(1);
  auto model = Model::load(test::embedded_model(), cpu);
  KvCache inner(model->kv_shape(), KvType::F16, KvType::F16, 16);
  ReentrantKv kv(*model, inner);
  const std::vector<int32_t> toks = ids(4, 3, model->config().n_vocab);
  std::vector<float> logits(size_t(model->config().n_vocab));
  model->forward(toks, kv, logits.data(), false);
  ASSERT_TRUE(kv.tried);
  EXPECT_NE(kv.error.find("another call on this model is running"), std::string::npos) << kv.error;
  // The refused call changed nothing: the outer pass equals a clean one, and the model still works.
  KvCache clean(model->kv_shape(), KvType::F16, KvType::F16, 16);
  std::vector<float> want(logits.size());
  model->forward(toks, clean, want.data(), false);
  EXPECT_EQ(0, std::memcmp(logits.data(), want.data(), logits.size() * sizeof(float)));
}

}  // namespace
}  // namespace polykv
