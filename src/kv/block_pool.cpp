// BlockPool: the three block states (free, cached-idle, in use) and the moves between them; the
// prefix hashes (xxHash's XXH3, 64 bits). See block_pool.h for the rules.
#include "kv/block_pool.h"

#include <xxhash.h>

#include <string>

#include "core/error.h"

namespace polykv {

namespace {

// Appends the 8-byte little-endian length, then the bytes: ("ab","c") and ("a","bc") differ.
void append_field(std::string& buf, std::string_view s) {
  uint64_t n = s.size();
  for (int i = 0; i < 8; ++i) buf.push_back(char((n >> (8 * i)) & 0xff));
  buf.append(s);
}

}  // namespace

BlockHash prefix_hash_seed(std::string_view model_id, std::string_view kv_types, std::string_view cache_salt) {
  std::string buf;
  buf.reserve(24 + model_id.size() + kv_types.size() + cache_salt.size());
  append_field(buf, model_id);
  append_field(buf, kv_types);
  append_field(buf, cache_salt);
  return XXH3_64bits(buf.data(), buf.size());
}

BlockHash block_hash(BlockHash parent, std::span<const int32_t> tokens) {
  // The token ids' bytes in memory order (little-endian on every target polykv builds for).
  return XXH3_64bits_withSeed(tokens.data(), tokens.size_bytes(), parent);
}

// ---- BlockPool ----------------------------------------------------------------------------------
// Invariants (verify() checks them all):
//  - free_ holds exactly the blocks with ref 0 and no hash, each once.
//  - The LRU list (sentinel = blocks_[n]) holds exactly the blocks with ref 0 and a hash, oldest
//    release first; n_cached_idle_ is its length. Blocks outside it have lru_prev = lru_next = -1.
//  - by_hash_[h] = b  <=>  blocks_[b].hashed && blocks_[b].hash == h.
//  - n_shared_ = #blocks with ref > 1.

BlockPool::BlockPool(int n_blocks) {
  check(n_blocks >= 0, "block pool: negative block count ", n_blocks);
  blocks_.resize(size_t(n_blocks) + 1);
  Block& s = blocks_[size_t(n_blocks)];
  s.lru_prev = s.lru_next = n_blocks;  // empty circular list
  free_.reserve(size_t(n_blocks));
  for (BlockId b = n_blocks - 1; b >= 0; --b) free_.push_back(b);  // block 0 on top
  by_hash_.reserve(size_t(n_blocks));
}

void BlockPool::check_id(BlockId b, const char* what) const {
  check(b >= 0 && b < n_blocks(), "block pool: ", what, " of block ", b, " out of range [0, ", n_blocks(), ")");
}

void BlockPool::lru_push_back(BlockId b) {
  const BlockId s = n_blocks();
  const BlockId last = blocks_[size_t(s)].lru_prev;
  blocks_[size_t(b)].lru_prev = last;
  blocks_[size_t(b)].lru_next = s;
  blocks_[size_t(last)].lru_next = b;
  blocks_[size_t(s)].lru_prev = b;
  ++n_cached_idle_;
}

void BlockPool::lru_unlink(BlockId b) {
  Block& x = blocks_[size_t(b)];
  blocks_[size_t(x.lru_prev)].lru_next = x.lru_next;
  blocks_[size_t(x.lru_next)].lru_prev = x.lru_prev;
  x.lru_prev = x.lru_next = -1;
  --n_cached_idle_;
}

BlockId BlockPool::allocate() {
  BlockId b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else if (n_cached_idle_ > 0) {
    b = blocks_[size_t(n_blocks())].lru_next;  // least recently released
    lru_unlink(b);
    Block& x = blocks_[size_t(b)];
    by_hash_.erase(x.hash);
    x.hashed = false;
    x.hash = 0;
    ++n_evictions_;
  } else {
    return -1;
  }
  blocks_[size_t(b)].ref = 1;
  return b;
}

void BlockPool::ref(BlockId b) {
  check_id(b, "ref");
  Block& x = blocks_[size_t(b)];
  if (x.ref == 0) {
    check(x.hashed, "block pool: ref of free block ", b, " (allocate it instead)");
    lru_unlink(b);  // a prefix hit revives a cached-idle block
  }
  if (++x.ref == 2) ++n_shared_;
}

void BlockPool::unref(BlockId b) {
  check_id(b, "unref");
  Block& x = blocks_[size_t(b)];
  check(x.ref > 0, "block pool: unref of block ", b, " whose refcount is 0 (double free?)");
  if (x.ref-- == 2) --n_shared_;
  if (x.ref > 0) return;
  if (x.hashed) {
    lru_push_back(b);
  } else {
    free_.push_back(b);
  }
}

int BlockPool::refcount(BlockId b) const {
  check_id(b, "refcount");
  return blocks_[size_t(b)].ref;
}

bool BlockPool::has_hash(BlockId b) const {
  check_id(b, "has_hash");
  return blocks_[size_t(b)].hashed;
}

BlockHash BlockPool::hash(BlockId b) const {
  check(has_hash(b), "block pool: block ", b, " has no hash");
  return blocks_[size_t(b)].hash;
}

BlockId BlockPool::lookup(BlockHash h) const {
  auto it = by_hash_.find(h);
  return it == by_hash_.end() ? -1 : it->second;
}

bool BlockPool::register_hash(BlockId b, BlockHash h) {
  check_id(b, "register_hash");
  Block& x = blocks_[size_t(b)];
  check(x.ref > 0, "block pool: register_hash of block ", b, " that is not in use");
  if (x.hashed) {
    check(x.hash == h, "block pool: block ", b, " already holds another hash");
    return true;
  }
  auto [it, inserted] = by_hash_.try_emplace(h, b);
  if (!inserted) return false;  // another block holds h: the caller keeps its own block unshared
  x.hashed = true;
  x.hash = h;
  return true;
}

void BlockPool::drop_hash(BlockId b) {
  check_id(b, "drop_hash");
  Block& x = blocks_[size_t(b)];
  check(x.ref > 0 && x.hashed, "block pool: drop_hash of block ", b, " that is not in use with a hash");
  by_hash_.erase(x.hash);
  x.hashed = false;
  x.hash = 0;
}

BlockPoolStats BlockPool::stats() const {
  BlockPoolStats s;
  s.n_blocks = n_blocks();
  s.n_free = int(free_.size());
  s.n_cached_idle = n_cached_idle_;
  s.n_in_use = s.n_blocks - s.n_free - s.n_cached_idle;
  s.n_shared = n_shared_;
  s.n_evictions = n_evictions_;
  return s;
}

void BlockPool::verify() const {
  const int n = n_blocks();
  std::vector<char> in_free(size_t(n), 0);
  for (BlockId b : free_) {
    check(b >= 0 && b < n && !in_free[size_t(b)], "block pool: free list holds ", b, " twice or out of range");
    in_free[size_t(b)] = 1;
  }
  std::vector<char> in_lru(size_t(n), 0);
  int lru_len = 0;
  for (BlockId b = blocks_[size_t(n)].lru_next, prev = n; b != n; prev = b, b = blocks_[size_t(b)].lru_next) {
    check(b >= 0 && b < n && !in_lru[size_t(b)] && lru_len < n, "block pool: LRU list is corrupt at ", b);
    check(blocks_[size_t(b)].lru_prev == prev, "block pool: LRU back link of ", b, " is wrong");
    in_lru[size_t(b)] = 1;
    ++lru_len;
  }
  check(lru_len == n_cached_idle_, "block pool: LRU length ", lru_len, " != counter ", n_cached_idle_);
  int shared = 0, hashed = 0;
  for (BlockId b = 0; b < n; ++b) {
    const Block& x = blocks_[size_t(b)];
    check(x.ref >= 0, "block pool: negative refcount on ", b);
    check(bool(in_free[size_t(b)]) == (x.ref == 0 && !x.hashed), "block pool: block ", b, " free-list membership wrong");
    check(bool(in_lru[size_t(b)]) == (x.ref == 0 && x.hashed), "block pool: block ", b, " LRU membership wrong");
    if (!in_lru[size_t(b)]) check(x.lru_prev == -1 && x.lru_next == -1, "block pool: stale LRU links on ", b);
    if (x.ref > 1) ++shared;
    if (x.hashed) {
      ++hashed;
      auto it = by_hash_.find(x.hash);
      check(it != by_hash_.end() && it->second == b, "block pool: hash of block ", b, " not indexed");
    }
  }
  check(hashed == int(by_hash_.size()), "block pool: hash index has entries of no block");
  check(shared == n_shared_, "block pool: shared counter ", n_shared_, " != ", shared);
}

}  // namespace polykv
