// K equalization: scales follow RoPE pairs and clamps, q'·k' = q·k, and a forward pass with f32 KV
// gives the same logits with or without it (it only changes what quantization sees).
#include <gtest/gtest.h>

#include <cmath>

#include "backend/cpu/cpu_backend.h"
#include "kv/k_equalizer.h"
#include "model/model.h"
#include "test_util.h"

namespace polykv {
namespace {

TEST(KEqualizer, ScalesSharePairsAndPreserveDots) {
  const int n_head_kv = 2, head_dim = 8, n = 32;
  for (RopeStyle style : {RopeStyle::Norm, RopeStyle::Neox}) {
    KEqualizer eq({0.5f, 4.0f, 16}, 1, n_head_kv, head_dim, head_dim, style);
    std::vector<float> k = test::random_floats(size_t(n) * n_head_kv * head_dim, 5);
    for (int t = 0; t < n; ++t) k[size_t(t) * n_head_kv * head_dim + 3] *= 50.0f;  // a loud channel
    const std::vector<float> k0 = k;
    std::vector<float> q = test::random_floats(size_t(n_head_kv) * head_dim, 6);  // one query per KV head
    const std::vector<float> q0 = q;
    eq.equalize_keys(0, 0, k.data(), n);
    eq.scale_queries(0, q.data(), 1, n_head_kv);
    const auto& s = eq.scales(0);
    const int partner = style == RopeStyle::Norm ? 2 : 7;
    EXPECT_EQ(s[3], s[size_t(partner)]);
    EXPECT_GT(s[3], 1.5f);
    for (float x : s) {
      EXPECT_LE(x, 4.0f);
      EXPECT_GE(x, 0.25f);
    }
    for (int t = 0; t < n; ++t)
      for (int g = 0; g < n_head_kv; ++g) {
        double a = 0, b = 0;
        for (int c = 0; c < head_dim; ++c) {
          const size_t i = (size_t(t) * n_head_kv + size_t(g)) * head_dim + size_t(c);
          a += double(q0[size_t(g) * head_dim + size_t(c)]) * k0[i];
          b += double(q[size_t(g) * head_dim + size_t(c)]) * k[i];
        }
        EXPECT_NEAR(a, b, 1e-4 * (1 + std::abs(a)));
      }
  }
}

TEST(KEqualizer, ShortFirstChunkStaysUnscaled) {
  KEqualizer eq({0.5f, 8.0f, 16}, 1, 1, 4, 4, RopeStyle::Neox);
  std::vector<float> k = {1, 100, 1, 1};
  eq.equalize_keys(0, 0, k.data(), 1);
  for (float x : eq.scales(0)) EXPECT_EQ(x, 1.0f);
  EXPECT_EQ(k[1], 100.0f);
}

TEST(KEqualizer, ForwardWithF32CacheIsUnchanged) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  CpuBackend backend(2);
  auto model = Model::load(test::fixtures_dir() + "/models/random/llama3_gqa.gguf", backend);
  std::vector<int32_t> ids;
  for (int i = 0; i < 40; ++i) ids.push_back(1 + (i * 37) % 7000);
  const int V = model->config().n_vocab;
  std::vector<float> a(ids.size() * size_t(V)), b(a.size());
  KvCache plain(model->kv_shape(), KvType::F32, KvType::F32, 64);
  model->forward(ids, plain, a.data(), true);
  KvCache eq(model->kv_shape(), KvType::F32, KvType::F32, 64);
  eq.set_k_equalizer(model->make_k_equalizer({0.5f, 8.0f, 16}));
  model->forward(ids, eq, b.data(), true);
  EXPECT_NE(eq.k_equalizer().scales(0)[0], 1.0f);  // it did calibrate
  float worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  EXPECT_LT(worst, 1e-4f);
}

}  // namespace
}  // namespace polykv
