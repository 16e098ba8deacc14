// What the decoder needs of one sequence's KV storage, whoever owns the memory: a private KvCache
// (kv/kv_cache.h, one sequence: run, eval) or a block table over the shared pool (kv/paged_kv.h,
// many sequences: the engine).
//
// Rules (both implementations):
//  - Positions are dense: after commit(n), positions 0..n-1 hold K and V for every layer.
//  - store() writes positions [pos, pos + n) of one layer (quantizing f32 rows in place), pos >= the
//    committed length only; view(layer) is valid until the next store()/commit() of the sequence.
#pragma once
#include <span>

#include "kv/block_pool.h"
#include "kv/k_equalizer.h"
#include "kv/kv_layer_view.h"

namespace polykv {

class ThreadPool;
class KvBlockStore;
class RecurrentState;

class KvSequence {
 public:
  virtual ~KvSequence() = default;
  virtual int n_tokens() const = 0;    // committed positions
  virtual int max_tokens() const = 0;  // context limit of this sequence
  // k: [n][n_head_kv][head_dim], v: [n][n_head_kv][head_dim_v], f32. Throws if pos + n > max_tokens().
  virtual void store(int layer, int pos, int n, const float* k, const float* v, ThreadPool* pool) = 0;
  virtual void commit(int n_tokens) = 0;
  virtual KvLayerView view(int layer) const = 0;
  // Per-channel K scales (kv/k_equalizer.h); disabled unless the owner installed one.
  virtual KEqualizer& k_equalizer() = 0;

  // The pool and block table behind the sequence, for backends that address KV by block id (CUDA:
  // the pool lives in device memory, where view()'s pointers must not be dereferenced on the host).
  // A private KvCache has neither: nullptr and an empty table.
  virtual const KvBlockStore* block_store() const { return nullptr; }
  virtual std::span<const BlockId> block_table() const { return {}; }

  // The fixed-size state of a hybrid model's linear-attention layers (kv/recurrent_state.h), kept beside
  // the KV and moved with it (commit, truncate); nullptr for models without such layers.
  virtual RecurrentState* recurrent_state() { return nullptr; }
};

// Quantizes rows [pos, pos + n) of one layer into the rows `rows` addresses (K in rows.k_type, V in
// rows.v_type); with a pool, in parallel, bit-identical to the serial result. The blocks must exist.
void store_kv_rows(const KvLayerView& rows, int pos, int n, const float* k, const float* v, ThreadPool* pool);

}  // namespace polykv
