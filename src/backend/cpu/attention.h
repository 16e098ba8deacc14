// Causal multi-head attention (GQA) of a chunk of queries over a sequence's KV cache, reading K and V
// in their cache types (kv/kv_type.h) directly: no f16/f32 copy of the cache is ever made.
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
//
// Work is split into items (query tile of up to 8 tokens, KV head, key chunk): each item scores its
// keys for all the tile's query rows (tokens x the KV head's query heads) with an online softmax
// and accumulates V in V's basis; long key ranges are cut into chunks run on different threads
// (flash-decoding), merged by log-sum-exp, and the merged output is turned back to the original
// basis once (finish_output).
void attention(const AttentionParams& p, const KvLayerView& kv, int pos0, int n_q, const float* q, float* out,
               ThreadPool& pool);

// Scalar reference: every visible row decoded by the type's reference dequantize_head (original
// basis), exact float query, double accumulation, two-pass softmax. For tests.
void attention_ref(const AttentionParams& p, const KvLayerView& kv, int pos0, int n_q, const float* q, float* out);

}  // namespace polykv
