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
//    hash is full and shared by content; writing one needs a copy (KvSequenceManager does that).
//  - unref() to 0 keeps a hashed block findable (cached-idle) and returns an unhashed one to free.
//  - Hashes are chained: hash(block i) covers the whole prefix up to the end of block i, the cache
//    key (model, KV types, optional tenant salt) included through the seed.
#pragma once
#include <cstdint>
#include <span>
#include <string_view>

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

}  // namespace polykv
