// One sequence's KV as a block table over the shared KvBlockStore: the engine's KvSequence. The
// block ids and their sharing are decided by KvSequenceManager (kv/kv_sequence_manager.h); this class
// only turns the table into the row pointers attention reads and stores rows into them.
//
// Rules:
//  - set_blocks() gives the table covering at least every position that will be stored before the
//    next set_blocks(); blocks shared with other sequences (a common prefix) are only ever read:
//    the manager copies a shared partial block before this sequence writes into it.
//  - Sliding-window layers read only their window but keep every block (shared blocks are shared
//    by all layers), unlike KvCache which releases old blocks per layer.
#pragma once
#include <memory>
#include <span>
#include <vector>

#include "kv/kv_block_store.h"
#include "kv/kv_sequence.h"
#include "kv/recurrent_state.h"

namespace polykv {

class PagedKv final : public KvSequence {
 public:
  PagedKv(KvBlockStore& store, int max_tokens);

  void set_blocks(std::span<const BlockId> table);  // rebuilds the per-layer row pointers
  // Positions the table's blocks already hold. A hybrid model's state must be at n_tokens already (the
  // caller copies a pool's state in first) or be rolled back to it (recurrent_state.h); else Error.
  void reset(int n_tokens);

  int n_tokens() const override { return n_tokens_; }
  int max_tokens() const override { return max_tokens_; }
  void store(int layer, int pos, int n, const float* k, const float* v, ThreadPool* pool) override;
  void commit(int n_tokens) override;
  KvLayerView view(int layer) const override;
  KEqualizer& k_equalizer() override { return k_equalizer_; }  // always disabled in the pool
  const KvBlockStore* block_store() const override { return &store_; }
  std::span<const BlockId> block_table() const override { return table_; }
  RecurrentState* recurrent_state() override { return state_.get(); }

 private:
  KvBlockStore& store_;
  int max_tokens_;
  int n_tokens_ = 0;
  int n_blocks_ = 0;
  std::vector<BlockId> table_;
  std::vector<std::vector<const uint8_t*>> k_ptrs_, v_ptrs_;  // [n_layer][n_blocks]
  KEqualizer k_equalizer_;
  std::unique_ptr<RecurrentState> state_;  // hybrid models (the store's shape has a recurrent part): beside the table
};

}  // namespace polykv
