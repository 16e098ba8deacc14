// Causal multi-head attention (GQA) of chunks of queries over paged KV (kv/kv_cache.h KvLayerView),
// reading K and V in their cache types (kv/kv_type.h) directly: no f16/f32 copy of the cache is ever
// made. One sequence (attention) or a ragged batch of sequences whose block tables may share
// prefix blocks (attention_batch); the first is the one-sequence case of the second.
//
// Invariance (the rule the engine's "batching never changes a token" rests on): the output row of
// a query depends only on its query vector, its position, the K/V contents it sees, the params and
// the CPU's kernels, never on the other queries of the call (of its sequence or of others), on how
// its sequence's prefill was chunked, on the thread count, or on which block pointers hold the
// content. It holds bit for bit because every query row is computed the same way whatever it is
// batched with:
//  - keys are cut at absolute positions into chunks of kAttentionChunkKeys, and chunks into tiles of
//    32 keys; a row's partial softmax state (m, l, acc) of a chunk runs over that chunk's tiles in
//    order, each tile decoded to f32 and scored / accumulated by the tile kernels of
//    attention_tile.h (q8_0 K: scored in integers from its blocks, attention_q8.h), whose per-row
//    arithmetic is independent of the other rows; keys the row must
//    not see get score -inf (weight 0) inside the same kernels;
//  - a row's chunk partials are folded by log-sum-exp in chunk order (0, 1, ...), one formula,
//    whether one work item ran all chunks or each chunk ran on its own thread.
// Caveat: K/V rows must be finite (as the model produces them): a masked key's weight is exactly 0,
// and 0 * inf would leak a NaN into rows of a tile that must not see it.
#pragma once
#include <span>

#include "backend/cpu/attention_q8.h"
#include "backend/cpu/attention_tile.h"
#include "backend/cpu/kv_row_ops.h"
#include "core/thread_pool.h"
#include "kv/kv_cache.h"

namespace polykv {

// Keys per chunk (absolute boundaries: chunk c holds positions [c * k, (c + 1) * k)): the unit of the
// flash-decoding split across threads. A multiple of the 32-key tile; chosen by measurement
// (docs/PERFORMANCE.md).
inline constexpr int kAttentionChunkKeys = 256;

struct AttentionParams {
  int n_head = 0;        // query heads; query head h reads KV head h / (n_head / n_head_kv)
  float scale = 1.0f;    // scores = (q·k) * scale
  float softcap = 0.0f;  // 0: none; else scores = softcap * tanh(scores / softcap)
  int window = 0;        // 0: full causal; else a query at q sees keys p with q - window < p <= q
  // nullptr: none; else [n_head] attention sinks (gpt-oss): query head h's softmax denominator gets
  // exp(sinks[h]) beside its visible keys' weights (a logit with no value, not scaled).
  const float* sinks = nullptr;
};

// One sequence of a batch: queries at positions pos0 .. pos0 + n_q - 1 (their K/V already stored in
// kv, which holds positions 0 .. pos0 + n_q - 1).
struct AttentionSeq {
  KvLayerView kv;
  int pos0 = 0;
  int n_q = 0;
  const float* q = nullptr;  // [n_q][n_head][head_dim]
  float* out = nullptr;      // [n_q][n_head][head_dim_v]; must not overlap another sequence's q or out
};

// The kernels attention runs on. attention_kernels() is the active ISA's set (core/isa.h); tests run the
// others ("avx2", "scalar") to check each ISA's path on a machine that has a better one.
struct AttentionKernels {
  ScoreTileFn score = nullptr;
  AccumulateTileFn accumulate = nullptr;
  SoftmaxTileFn softmax = nullptr;
  const KvRowKernels& (*rows)(KvType) = nullptr;  // K/V row decoders
  // Integer scores of q8_0 K (attention_q8.h), used instead of decoding K to f32 and `score` when
  // set and attention_q8_enabled(); nullptr: this ISA scores every K type in f32.
  Q8ScoreTileFn score_q8 = nullptr;
};
const AttentionKernels& attention_kernels();
// The set of one ISA ("avx512", "avx2", "scalar"); false if this CPU lacks it.
bool attention_kernels_for(const char* isa, AttentionKernels& out);

// q: [n_q][n_head][head_dim]; out: [n_q][n_head][head_dim_v]. The batch of one sequence.
void attention(const AttentionParams& p, const KvLayerView& kv, int pos0, int n_q, const float* q, float* out,
               ThreadPool& pool);

// Attention of every sequence of a batch, each over its own block table. All views must share
// types and head sizes (checked). When sequences share prefix blocks (the same k_blocks[i] and
// v_blocks[i] pointers: shared blocks are read-only, so the same pointer means the same content),
// each shared 32-key tile is decoded once and scored against the queries of all of them (cascade
// attention); each query's chunk partials are then merged with its private suffix's by log-sum-exp.
// Every output row is bit-identical to the sequence's own attention() call (see Invariance). A view
// with a V precision window (v_hi) is never shared with another sequence (it stays correct, just
// unshared).
void attention_batch(const AttentionParams& p, std::span<const AttentionSeq> seqs, ThreadPool& pool);
void attention_batch(const AttentionParams& p, std::span<const AttentionSeq> seqs, ThreadPool& pool,
                     const AttentionKernels& kernels);

// True when attention_batch with these kernels scores K of type k_type and head size hd in integers
// (attention_q8.h: q8_0 K, an ISA with the kernel, attention_q8_enabled()); the query is then rounded
// to q8_0 blocks first.
bool attention_uses_q8_scores(const AttentionKernels& kernels, KvType k_type, int hd);

// Scalar reference: every visible row decoded by the type's reference dequantize_head (original
// basis), exact float query (q8_query: the query rounded through q8_0 blocks, as the integer scores
// see it), double accumulation, two-pass softmax. For tests.
void attention_ref(const AttentionParams& p, const KvLayerView& kv, int pos0, int n_q, const float* q, float* out,
                   bool q8_query = false);

}  // namespace polykv
