// The check of Model::forward_batch over paged sequences in the shared block store: three
// sequences prefilled in mixed chunks, batched with each other, give logits bit-identical to the same
// tokens run alone through a private KvCache. Shared by the dense and MoE forward-batch tests.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>
#include <vector>

#include "kv/kv_block_store.h"
#include "kv/kv_cache.h"
#include "kv/paged_kv.h"
#include "model/model.h"

namespace polykv::test {

inline std::vector<int32_t> ids(int n, int seed) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[size_t(i)] = 3 + (seed * 131 + i * 37 + (i * i) % 11) % 7000;
  return v;
}

// Logits of every position of `tokens` run alone, chunk by chunk, through a private cache.
inline std::vector<float> alone(Model& m, const std::vector<int32_t>& tokens, KvType kt, KvType vt, int chunk) {
  const int V = m.config().n_vocab;
  KvCache kv(m.kv_shape(), kt, vt, 1024, 16);
  std::vector<float> out(tokens.size() * size_t(V));
  for (size_t p = 0; p < tokens.size(); p += size_t(chunk)) {
    const size_t n = std::min(tokens.size() - p, size_t(chunk));
    m.forward(std::span(tokens).subspan(p, n), kv, out.data() + p * size_t(V), true);
  }
  return out;
}

// Fails the calling test (memcmp) unless every sequence's batched logits equal its run alone.
inline void expect_batched_equals_alone(Model& model, KvType kt, KvType vt) {
  const int V = model.config().n_vocab, bt = 16;
  KvBlockStore store(model.kv_shape(), kt, vt, 64, bt);
  // Three sequences; their prompts are prefilled in mixed chunks, batched with the others' decodes.
  const std::vector<std::vector<int32_t>> toks = {ids(40, 1), ids(23, 2), ids(57, 3)};
  std::vector<std::vector<float>> ref;
  for (const auto& t : toks) ref.push_back(alone(model, t, kt, vt, 7));

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
  const int chunks[3] = {5, 1, 13};  // tokens per step for each sequence (1: token by token)
  std::vector<size_t> done(3, 0);
  while (done[0] < toks[0].size() || done[1] < toks[1].size() || done[2] < toks[2].size()) {
    std::vector<Model::BatchSeq> batch;
    for (size_t s = 0; s < 3; ++s) {
      if (done[s] == toks[s].size()) continue;
      const size_t n = std::min(toks[s].size() - done[s], size_t(chunks[s]));
      batch.push_back({std::span(toks[s]).subspan(done[s], n), &kv[s], got[s].data() + done[s] * size_t(V), true});
      done[s] += n;
    }
    model.forward_batch(batch);
  }
  for (size_t s = 0; s < 3; ++s) {
    SCOPED_TRACE(s);
    ASSERT_EQ(got[s].size(), ref[s].size());
    double max_diff = 0;
    for (size_t i = 0; i < got[s].size(); ++i) max_diff = std::max(max_diff, double(std::fabs(got[s][i] - ref[s][i])));
    EXPECT_EQ(0, std::memcmp(got[s].data(), ref[s].data(), got[s].size() * sizeof(float)))
        << "not bit-identical; max |diff| " << max_diff;
  }
}

}  // namespace polykv::test
