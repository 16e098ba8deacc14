// Model::BatchSeq::hidden: every row's final hidden state (after output_norm), whatever else the
// step computes: the same bits alone, in a batch, with or without logits; and the logits are the
// output matrix times it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "quant/quant.h"
#include "test_util.h"

namespace polykv {
namespace {

std::vector<int32_t> ids(int n, int seed) {
  std::vector<int32_t> v(size_t(n), 0);
  for (int i = 0; i < n; ++i) v[size_t(i)] = 3 + (seed * 173 + i * 41 + (i * i) % 13) % 7000;
  return v;
}

TEST(ForwardHidden, SameBitsAloneInABatchWithOrWithoutLogits) {
  CpuBackend backend(2);
  auto m = Model::load(test::embedded_model(), backend);
  const int E = m->config().n_embd, V = m->config().n_vocab;
  const auto a = ids(11, 1), b = ids(6, 2);
  // Alone, hidden only (no logits rows at all).
  std::vector<float> alone(a.size() * size_t(E), NAN);
  {
    KvCache kv(m->kv_shape(), KvType::F16, KvType::F16, 64);
    const Model::BatchSeq s{a, &kv, nullptr, false, alone.data()};
    m->forward_batch(std::span(&s, 1));
  }
  for (float v : alone) ASSERT_TRUE(std::isfinite(v));
  // In a batch after another sequence, with all logits, in two chunks.
  std::vector<float> batched(a.size() * size_t(E), NAN), logits(a.size() * size_t(V));
  std::vector<float> other_hidden(b.size() * size_t(E)), other_logits(static_cast<size_t>(V));
  KvCache kva(m->kv_shape(), KvType::F16, KvType::F16, 64), kvb(m->kv_shape(), KvType::F16, KvType::F16, 64);
  const size_t c1 = 4;
  for (int step = 0; step < 2; ++step) {
    const size_t r0 = step == 0 ? 0 : c1, r1 = step == 0 ? c1 : a.size();
    const Model::BatchSeq seqs[2] = {
        {std::span(b).subspan(step == 0 ? 0 : 3, 3), &kvb, other_logits.data(), false,
         other_hidden.data() + (step == 0 ? 0 : 3) * size_t(E)},
        {std::span(a).subspan(r0, r1 - r0), &kva, logits.data() + r0 * size_t(V), true, batched.data() + r0 * size_t(E)}};
    m->forward_batch(seqs);
  }
  EXPECT_EQ(alone, batched);

  // The logits are output · hidden (the vocabulary matmul of the same rows).
  const GgufTensor& out = m->gguf().tensor("output.weight");
  std::vector<float> w(size_t(out.n_elements));
  dequantize_row_ref(out.type, out.data, w.data(), out.n_elements);
  float max_err = 0, max_ref = 0;
  for (size_t t = 0; t < a.size(); ++t)
    for (int o = 0; o < V; o += 7) {
      double s = 0;
      for (int i = 0; i < E; ++i) s += double(w[size_t(o) * size_t(E) + size_t(i)]) * batched[t * size_t(E) + size_t(i)];
      max_err = std::max(max_err, float(std::fabs(s - logits[t * size_t(V) + size_t(o)])));
      max_ref = std::max(max_ref, float(std::fabs(s)));
    }
  EXPECT_LT(max_err, 0.02f * max_ref) << "logits vs output · hidden";
  // hidden = rms(x) · output_norm: divided by the norm weights, each row has mean square 1.
  const auto& norm = m->weights().output_norm;
  for (size_t t = 0; t < a.size(); ++t) {
    double ms = 0;
    for (int i = 0; i < E; ++i) ms += std::pow(double(batched[t * size_t(E) + size_t(i)]) / norm[size_t(i)], 2);
    EXPECT_NEAR(ms / E, 1.0, 1e-3) << "row " << t;
  }
}

}  // namespace
}  // namespace polykv
