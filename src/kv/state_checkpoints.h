// Recurrent-state checkpoints for automatic prefix caching of hybrid models (Gated DeltaNet layers).
// A cached KV block holds K/V but not the recurrent state at its end, so a prefix hit of a hybrid
// sequence needs the state at the hit's last position too: this cache keeps states, one slot each
// (RecurrentState::slot_bytes()), keyed by the chain hash of the full block they end
// (KvSequenceManager::chain_hash), i.e. by the whole prefix they summarise plus the cache key in its
// seed. The KvSequenceManager's `usable_end` predicate is contains(): a hit ends only on a block
// whose end has a checkpoint. vLLM's and SGLang's hybrid prefix caches were the designs studied.
//
// Rules:
//  - At most capacity() checkpoints; save() of a new hash when full evicts one and reuses its slot:
//    the least recently saved or restored *plain* checkpoint, or for an anchor when there is none,
//    the least recently used anchor (a plain save into a cache full of anchors saves nothing).
//    Anchors are the checkpoints a caller expects to be hit (the engine: a prompt's last full block,
//    and the point where a prompt left a cached prefix); plain ones are every other chunk end, so a
//    long prompt's many chunk ends never flush the anchors. Saving an existing hash as an anchor
//    promotes it. capacity 0: nothing is ever saved (caching off).
//  - Slots live in the states' memory (host, or the GPU's for a CUDA pool) and are allocated on first
//    use; when the memory refuses one, the oldest checkpoint's slot is reused, or with none, nothing
//    is saved (save returns false). Copies go through KvMemory::copy, so kv/ touches no device code.
//  - A checkpoint outliving its blocks is harmless: the manager never matches past a missing block,
//    so it is not found until LRU evicts it. Hash collisions are the prefix cache's (64-bit chains).
//  - Each checkpoint records its position; restore() sets the state there (the engine checks it
//    against the hit).
#pragma once
#include <cstdint>
#include <list>
#include <unordered_map>

#include "kv/block_pool.h"
#include "kv/recurrent_state.h"

namespace polykv {

class StateCheckpointCache {
 public:
  StateCheckpointCache(const RecurrentShape& shape, KvMemory& memory, int capacity);
  ~StateCheckpointCache();
  StateCheckpointCache(const StateCheckpointCache&) = delete;
  StateCheckpointCache& operator=(const StateCheckpointCache&) = delete;

  // Bytes `capacity` checkpoints of this shape take at most (for --kv-memory budgets).
  static size_t bytes_for(const RecurrentShape& shape, int capacity);

  int capacity() const { return capacity_; }
  int size() const { return int(plain_.size() + anchors_.size()); }
  int n_anchors() const { return int(anchors_.size()); }
  int64_t n_evictions() const { return n_evictions_; }
  bool contains(BlockHash h) const { return by_hash_.count(h) != 0; }
  // Position the checkpoint under h summarises, or -1.
  int position(BlockHash h) const;

  // Saves s's current state (at s.n_tokens(), between steps) under h. An existing checkpoint under h
  // is only refreshed in the LRU order (same hash, same prefix, same state). False when nothing was
  // saved (capacity 0, or no slot could be had under the rules). Throws Error on a shape or memory
  // mismatch.
  bool save(BlockHash h, const RecurrentState& s, bool anchor = false);
  bool is_anchor(BlockHash h) const;
  // s becomes the state saved under h, at position(h); the checkpoint becomes most recently used.
  // Throws Error when there is none, or on a shape or memory mismatch.
  void restore(BlockHash h, RecurrentState& s);

 private:
  struct Entry {
    BlockHash hash;
    int position;
    void* slot;
    bool anchor;
  };
  using List = std::list<Entry>;
  void check_compatible(const RecurrentState& s) const;
  List& list_of(bool anchor) { return anchor ? anchors_ : plain_; }

  RecurrentShape shape_;
  KvMemory* memory_;
  int capacity_;
  size_t slot_bytes_;
  List plain_, anchors_;  // each: front = least recently saved or restored
  std::unordered_map<BlockHash, List::iterator> by_hash_;
  int64_t n_evictions_ = 0;
};

}  // namespace polykv
