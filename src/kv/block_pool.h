// Bookkeeping of the shared KV pool: block ids, reference counts, a free list, the prefix-cache index
// of full blocks, and LRU eviction of unreferenced cached blocks. It holds ids, never tensors: the
// bytes of block b live in a KvBlockStore (kv/kv_block_store.h) at the same id. Tested with fake
// requests, without a model (vLLM v1's block pool is the model studied).
//
// Rules:
//  - A block is in exactly one of three states: free (ref 0, no hash), cached-idle (ref 0, has a
//    hash, findable by lookup, evictable LRU), or in use (ref > 0, with or without a hash).
//  - allocate() takes a free block, else evicts the least recently released cached-idle block
//    (dropping its hash); it returns -1 when every block is in use. The new block has ref 1, no hash.
//  - A block's contents may only be written while its ref is 1 and it has no hash: a block with a
//    hash is full and shared by content (every row valid, even where a holder rolled back to a
//    position inside it); writing one needs a copy or, at ref 1, drop_hash() first
//    (KvSequenceManager::reserve does that).
//  - unref() to 0 keeps a hashed block findable (cached-idle) and returns an unhashed one to free.
//  - Hashes are chained: hash(block i) covers the whole prefix up to the end of block i, the cache
//    key (model, KV types, optional tenant salt) included through the seed.
//  - One hash maps to at most one block: register_hash() of a hash already held by another block
//    changes nothing and returns false (the caller keeps its own, unshared block).
//  - Misuse (an id out of range, ref of a free block, unref of a block with ref 0, a second hash
//    on a block) throws polykv::Error and leaves the pool unchanged.
//  - allocate/ref/unref/lookup/register_hash/drop_hash are O(1): a stack of free ids, an intrusive
//    doubly-linked LRU list of cached-idle blocks, a hash map from hash to block.
#pragma once
#include <cstdint>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace polykv {

using BlockId = int32_t;
using BlockHash = uint64_t;

// Seed of a hash chain: model identity, KV types and the optional per-tenant cache_salt, so that
// blocks are shared only between requests that would compute the same K/V bytes and may see them.
BlockHash prefix_hash_seed(std::string_view model_id, std::string_view kv_types, std::string_view cache_salt);
// Hash of a full block: parent = the previous block's hash (the seed for block 0), tokens = its ids.
BlockHash block_hash(BlockHash parent, std::span<const int32_t> tokens);

struct BlockPoolStats {
  int n_blocks = 0;
  int n_free = 0;         // free, never hashed or evicted
  int n_cached_idle = 0;  // ref 0 with a hash: reusable by a prefix hit, evictable
  int n_in_use = 0;       // ref > 0
  int n_shared = 0;       // ref > 1
  int64_t n_evictions = 0;
};

class BlockPool {
 public:
  explicit BlockPool(int n_blocks);

  // A block with ref 1 and no hash, or -1 when every block is in use. Takes a free block first
  // (lowest ids first on a fresh pool), else evicts the least recently released cached-idle block.
  BlockId allocate();
  // ref: a block in use or cached-idle (a prefix hit) gets one more holder; ref of a free block
  // throws (its contents are garbage). unref: one holder less; at 0 a hashed block becomes
  // cached-idle (most recently released: evicted last), an unhashed one free.
  void ref(BlockId b);
  void unref(BlockId b);

  int refcount(BlockId b) const;
  bool has_hash(BlockId b) const;
  BlockHash hash(BlockId b) const;  // throws if !has_hash(b)
  // The block holding hash h (in use or cached-idle), or -1. Changes no refs and no LRU order.
  BlockId lookup(BlockHash h) const;
  // Marks a full block in use (ref > 0) as cached under h. False, and no change, if h already maps
  // to another block. True with no change if b already holds h; throws if b holds another hash.
  bool register_hash(BlockId b, BlockHash h);
  // Removes the hash of a block in use (ref > 0) so its holder may write it again (only sensible
  // at ref 1); the hash stops being findable.
  void drop_hash(BlockId b);

  BlockPoolStats stats() const;
  int n_blocks() const { return int(blocks_.size()) - 1; }  // the sentinel is not a block
  int n_available() const { return int(free_.size()) + n_cached_idle_; }  // free + cached-idle

  // Checks every internal invariant in O(n_blocks) (lists, counters, hash map); throws Error on the
  // first violation. For tests.
  void verify() const;

 private:
  struct Block {
    int32_t ref = 0;
    bool hashed = false;
    BlockHash hash = 0;
    BlockId lru_prev = -1, lru_next = -1;  // links while cached-idle; sentinel = n_blocks
  };
  void check_id(BlockId b, const char* what) const;
  void lru_push_back(BlockId b);
  void lru_unlink(BlockId b);

  std::vector<Block> blocks_;  // [n_blocks + 1]: the last entry is the LRU list's sentinel
  std::vector<BlockId> free_;  // stack of free ids (ref 0, no hash); top = next to allocate
  std::unordered_map<BlockHash, BlockId> by_hash_;  // every hashed block, in use or cached-idle
  int n_cached_idle_ = 0;      // length of the LRU list (head = sentinel.lru_next = oldest)
  int n_shared_ = 0;           // blocks with ref > 1
  int64_t n_evictions_ = 0;
};

}  // namespace polykv
