// The check of Model::forward_batch over paged sequences in the shared block store: three
// sequences prefilled in mixed chunks, batched with each other, give logits bit-identical to the same
// tokens run alone through a private KvCache. Shared by the dense and MoE forward-batch tests.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "core/argmax_ref.h"
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

// One PagedKv per token list in `store`, each given fresh blocks from `next` on (enough for its tokens).
inline std::vector<PagedKv> paged_sequences(KvBlockStore& store, const std::vector<std::vector<int32_t>>& toks,
                                            BlockId& next) {
  std::vector<PagedKv> kv;
  for (const auto& t : toks) {
    std::vector<BlockId> table;
    for (size_t b = 0; b < (t.size() + size_t(store.block_tokens()) - 1) / size_t(store.block_tokens()); ++b)
      table.push_back(next++);
    kv.emplace_back(store, 1024);
    kv.back().set_blocks(table);
  }
  return kv;
}

// Fails the calling test (memcmp) unless every sequence's batched logits equal its run alone.
inline void expect_batched_equals_alone(Model& model, KvType kt, KvType vt) {
  const int V = model.config().n_vocab, bt = 16;
  KvBlockStore store(model.kv_shape(), kt, vt, 64, bt);
  // Three sequences; their prompts are prefilled in mixed chunks, batched with the others' decodes.
  const std::vector<std::vector<int32_t>> toks = {ids(40, 1), ids(23, 2), ids(57, 3)};
  std::vector<std::vector<float>> ref;
  for (const auto& t : toks) ref.push_back(alone(model, t, kt, vt, 7));

  BlockId next = 0;
  std::vector<PagedKv> kv = paged_sequences(store, toks, next);
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

// Model::BatchSeq::argmax (the backend's argmax of each logit row) in batches that mix sequences with
// logits and argmax (every row), argmax only (the last row, or every row), and logits only (the last row:
// its logits sit after argmax-only rows in the workspace, so they take the per-sequence download): each
// argmax equals argmax_first_ref of the logits the same call returned. exact_alone (a backend whose
// batched logits are bit-identical to a sequence run alone: the CPU's): also the argmax-only rows against
// the run alone, and the logits-only rows bit for bit. Last, one sequence alone with logits and argmax.
inline void expect_argmax_rows(Model& model, KvType kt, KvType vt, bool exact_alone) {
  const int V = model.config().n_vocab, bt = 16;
  KvBlockStore store(model.kv_shape(), kt, vt, 64, bt, model.backend().kv_memory());  // a GPU's in its memory
  const std::vector<std::vector<int32_t>> toks = {ids(21, 4), ids(30, 5), ids(26, 6)};
  std::vector<std::vector<float>> ref;
  if (exact_alone)
    for (const auto& t : toks) ref.push_back(alone(model, t, kt, vt, 7));
  BlockId next = 0;
  std::vector<PagedKv> kv = paged_sequences(store, toks, next);
  const int chunks[3] = {4, 3, 5};
  std::vector<size_t> done(3, 0);
  int step = 0;
  while (done[0] < toks[0].size() || done[1] < toks[1].size() || done[2] < toks[2].size()) {
    std::vector<Model::BatchSeq> batch;
    std::vector<std::vector<float>> logits(3);
    std::vector<std::vector<int32_t>> am(3);
    std::vector<size_t> at(3, 0), n(3, 0);
    std::vector<bool> all(3, false);
    for (size_t s = 0; s < 3; ++s) {
      if (done[s] == toks[s].size()) continue;
      n[s] = std::min(toks[s].size() - done[s], size_t(chunks[s]));
      at[s] = done[s];
      all[s] = s == 0 || (s == 1 && step % 2 == 0);
      const size_t rows = all[s] ? n[s] : 1;
      Model::BatchSeq b{std::span(toks[s]).subspan(done[s], n[s]), &kv[s], nullptr, all[s]};
      if (s != 1) logits[s].assign(rows * size_t(V), NAN), b.logits = logits[s].data();
      if (s != 2) am[s].assign(rows, -7), b.argmax = am[s].data();
      batch.push_back(b);
      done[s] += n[s];
    }
    model.forward_batch(batch);
    for (size_t s = 0; s < 3; ++s) {
      if (n[s] == 0) continue;
      SCOPED_TRACE("step " + std::to_string(step) + " sequence " + std::to_string(s));
      const size_t rows = all[s] ? n[s] : 1, p0 = at[s] + n[s] - rows;  // positions of the returned rows
      for (size_t r = 0; r < rows; ++r) {
        if (s == 0) EXPECT_EQ(am[s][r], argmax_first_ref(logits[s].data() + r * size_t(V), V)) << r;
        if (exact_alone && s == 1) EXPECT_EQ(am[s][r], argmax_first_ref(ref[s].data() + (p0 + r) * size_t(V), V)) << r;
        if (exact_alone && s == 2)
          EXPECT_EQ(0, std::memcmp(logits[s].data(), ref[s].data() + p0 * size_t(V), size_t(V) * sizeof(float)));
      }
    }
    ++step;
  }
  // One sequence alone (the CPU's direct-logits path), logits and argmax of every row, in fresh blocks.
  std::vector<PagedKv> solo_kv = paged_sequences(store, {toks[0]}, next);
  PagedKv& solo = solo_kv[0];
  std::vector<float> lg(toks[0].size() * size_t(V));
  std::vector<int32_t> am(toks[0].size(), -7);
  const Model::BatchSeq one{std::span(toks[0]), &solo, lg.data(), true, nullptr, am.data()};
  model.forward_batch(std::span(&one, 1));
  for (size_t r = 0; r < toks[0].size(); ++r) EXPECT_EQ(am[r], argmax_first_ref(lg.data() + r * size_t(V), V)) << r;
}

}  // namespace polykv::test
