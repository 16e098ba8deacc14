// One sequence's KV in a block store of its own: a KvBlockStore sized for max_tokens, in a given
// KvMemory, and a PagedKv over the identity block table [0, 1, ..., n_blocks - 1]. It is how a
// single-sequence command (run, logits, bench, eval) keeps its KV where a device backend can address
// it (a backend's kv_memory(), by block_store() and block_table()), which a KvCache cannot: KvCache
// keeps host blocks and has host-only features (V precision window, K equalization).
//
// Rules:
//  - Every block is allocated up front, ceil(max_tokens / block_tokens) of them; like PagedKv,
//    sliding-window layers keep all their blocks (KvCache releases those out of the window).
//  - No V precision window and no K equalization: k_equalizer() stays disabled.
//  - store() quantizes on the host (store_kv_rows), so it needs host-accessible memory (it throws
//    otherwise); a device backend writes the blocks with its own kernels instead.
//  - Going through the same store and attention code as KvCache, it gives a forward pass the same
//    results bit for bit (attention never depends on which blocks hold a position).
#pragma once
#include <span>

#include "kv/kv_block_store.h"
#include "kv/kv_memory.h"
#include "kv/paged_kv.h"

namespace polykv {

class OwnedPagedKv final : public KvSequence {
 public:
  // Throws Error if a type cannot hold the shape's head sizes or the memory cannot hold the blocks.
  OwnedPagedKv(const KvShape& shape, KvType k_type, KvType v_type, int max_tokens, int block_tokens = 256,
               KvMemory& memory = host_kv_memory());
  OwnedPagedKv(const OwnedPagedKv&) = delete;  // paged_ refers to blocks_
  OwnedPagedKv& operator=(const OwnedPagedKv&) = delete;

  int n_tokens() const override { return paged_.n_tokens(); }
  int max_tokens() const override { return paged_.max_tokens(); }
  void store(int layer, int pos, int n, const float* k, const float* v, ThreadPool* pool) override;
  void commit(int n_tokens) override { paged_.commit(n_tokens); }
  // Rolls back to n_tokens positions (no-op if it holds fewer); later stores overwrite the rest.
  void truncate(int n_tokens);
  // Makes this KV hold src's first n positions, bit for bit: both keep every block in the identity
  // table, so the first ceil(n / block_tokens) blocks are copied as bytes, by the memory's own copy
  // (host or device: KvMemory::copy). Throws Error unless both have the same shape, types, block size
  // and memory, neither has recurrent state, and src holds n positions (n <= max_tokens()).
  void copy_prefix_from(const OwnedPagedKv& src, int n);
  KvLayerView view(int layer) const override { return paged_.view(layer); }
  KEqualizer& k_equalizer() override { return paged_.k_equalizer(); }
  const KvBlockStore* block_store() const override { return &blocks_; }
  std::span<const BlockId> block_table() const override { return paged_.block_table(); }
  RecurrentState* recurrent_state() override { return paged_.recurrent_state(); }

  KvType k_type() const { return blocks_.k_type(); }
  KvType v_type() const { return blocks_.v_type(); }
  size_t bytes_per_token() const { return blocks_.bytes_per_token(); }  // K + V, all layers
  size_t allocated_bytes() const { return blocks_.block_bytes() * size_t(blocks_.n_blocks()); }

 private:
  KvBlockStore blocks_;
  PagedKv paged_;  // over blocks_
};

}  // namespace polykv
