// Causal multi-head attention (GQA) of a chunk of queries over a sequence's KV cache.
#pragma once
#include "core/thread_pool.h"
#include "kv/kv_cache.h"

namespace polykv {

struct AttentionParams {
  int n_head = 0;        // query heads; query head h reads KV head h / (n_head / n_head_kv)
  float scale = 1.0f;    // scores = (q·k) * scale
  float softcap = 0.0f;  // 0: none; else scores = softcap * tanh(scores / softcap)
  int window = 0;        // 0: full causal; else a query at q sees keys p with q - window < p <= q
};

// q: [n_q][n_head][head_dim] for positions pos0 .. pos0 + n_q - 1 (their K/V already stored in kv);
// out: [n_q][n_head][head_dim_v].
void attention(const AttentionParams& p, const KvLayerView& kv, int pos0, int n_q, const float* q, float* out,
               ThreadPool& pool);

// Scalar reference (double accumulation), for tests.
void attention_ref(const AttentionParams& p, const KvLayerView& kv, int pos0, int n_q, const float* q, float* out);

}  // namespace polykv
