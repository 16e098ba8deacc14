// BlockPool (kv/block_pool.h): the three block states, LRU eviction of cached-idle blocks, the hash
// index and its one-block-per-hash rule, misuse errors, and the prefix hash functions.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <vector>

#include "core/error.h"
#include "kv/block_pool.h"

namespace polykv {
namespace {

void expect_stats(const BlockPool& p, int n_free, int n_cached_idle, int n_in_use, int n_shared) {
  const BlockPoolStats s = p.stats();
  EXPECT_EQ(s.n_free, n_free);
  EXPECT_EQ(s.n_cached_idle, n_cached_idle);
  EXPECT_EQ(s.n_in_use, n_in_use);
  EXPECT_EQ(s.n_shared, n_shared);
  EXPECT_EQ(s.n_free + s.n_cached_idle + s.n_in_use, s.n_blocks);
  EXPECT_EQ(p.n_available(), n_free + n_cached_idle);
  p.verify();
}

TEST(PrefixHash, SeedFieldsAreLengthPrefixed) {
  EXPECT_NE(prefix_hash_seed("ab", "c", ""), prefix_hash_seed("a", "bc", ""));
  EXPECT_NE(prefix_hash_seed("a", "", "b"), prefix_hash_seed("", "a", "b"));
  EXPECT_NE(prefix_hash_seed("m", "q8_0/turbo3", ""), prefix_hash_seed("m", "q8_0/turbo3", "x"));
  EXPECT_NE(prefix_hash_seed("m", "q8_0/turbo3", "t1"), prefix_hash_seed("m", "q8_0/turbo3", "t2"));
  EXPECT_NE(prefix_hash_seed("m", "f16/f16", ""), prefix_hash_seed("m", "q8_0/f16", ""));
  EXPECT_EQ(prefix_hash_seed("model", "f16/f16", "salt"), prefix_hash_seed("model", "f16/f16", "salt"));
}

TEST(PrefixHash, BlockHashChainsParentAndEveryToken) {
  const std::vector<int32_t> t = {1, 2, 3, 4};
  const BlockHash h = block_hash(7, t);
  EXPECT_EQ(h, block_hash(7, std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_NE(h, block_hash(8, t));                                      // parent (or seed) matters
  EXPECT_NE(h, block_hash(7, std::vector<int32_t>{2, 1, 3, 4}));       // order matters
  EXPECT_NE(h, block_hash(7, std::vector<int32_t>{1, 2, 3, 5}));
  EXPECT_NE(h, block_hash(7, std::vector<int32_t>{1, 2, 3, 4 + 65536}));  // high bytes matter
  // Different hashes over many small distinct blocks (a 64-bit hash should never collide here).
  std::set<BlockHash> seen;
  for (int32_t a = 0; a < 64; ++a)
    for (int32_t b = 0; b < 64; ++b) seen.insert(block_hash(0, std::vector<int32_t>{a, b}));
  EXPECT_EQ(seen.size(), 64u * 64u);
}

TEST(BlockPool, FreshPoolHandsOutEveryBlockOnceThenMinusOne) {
  BlockPool p(5);
  expect_stats(p, 5, 0, 0, 0);
  std::set<BlockId> got;
  for (int i = 0; i < 5; ++i) {
    const BlockId b = p.allocate();
    EXPECT_EQ(b, i);  // lowest ids first on a fresh pool
    EXPECT_EQ(p.refcount(b), 1);
    EXPECT_FALSE(p.has_hash(b));
    got.insert(b);
  }
  EXPECT_EQ(got.size(), 5u);
  EXPECT_EQ(p.allocate(), -1);
  expect_stats(p, 0, 0, 5, 0);
  BlockPool empty(0);
  EXPECT_EQ(empty.allocate(), -1);
  EXPECT_THROW(BlockPool(-1), Error);
}

TEST(BlockPool, RefUnrefAndSharedCount) {
  BlockPool p(3);
  const BlockId a = p.allocate();
  p.ref(a);
  p.ref(a);
  EXPECT_EQ(p.refcount(a), 3);
  expect_stats(p, 2, 0, 1, 1);
  p.unref(a);
  p.unref(a);
  expect_stats(p, 2, 0, 1, 0);
  p.unref(a);  // unhashed at 0: back to free
  expect_stats(p, 3, 0, 0, 0);
}

TEST(BlockPool, MisuseThrowsAndChangesNothing) {
  BlockPool p(2);
  const BlockId a = p.allocate();
  p.unref(a);
  EXPECT_THROW(p.unref(a), Error);  // double free
  EXPECT_THROW(p.ref(a), Error);    // ref of a free block: its contents are garbage
  EXPECT_THROW(p.ref(2), Error);
  EXPECT_THROW(p.unref(-1), Error);
  EXPECT_THROW(p.refcount(7), Error);
  EXPECT_THROW(p.register_hash(a, 5), Error);  // not in use
  EXPECT_THROW(p.drop_hash(a), Error);
  EXPECT_THROW(p.hash(a), Error);
  expect_stats(p, 2, 0, 0, 0);
  const BlockId b = p.allocate();
  ASSERT_TRUE(p.register_hash(b, 9));
  EXPECT_TRUE(p.register_hash(b, 9));          // same hash again: no change
  EXPECT_THROW(p.register_hash(b, 10), Error);  // a second, different hash
  EXPECT_EQ(p.hash(b), 9u);
  EXPECT_EQ(p.lookup(10), -1);
  p.verify();
}

TEST(BlockPool, HashedBlockStaysFindableWhenIdleAndIsRevivedByRef) {
  BlockPool p(3);
  const BlockId a = p.allocate();
  EXPECT_EQ(p.lookup(42), -1);
  ASSERT_TRUE(p.register_hash(a, 42));
  EXPECT_EQ(p.lookup(42), a);
  p.unref(a);
  expect_stats(p, 2, 1, 0, 0);
  EXPECT_EQ(p.lookup(42), a);  // cached-idle: a prefix hit can still take it
  EXPECT_EQ(p.refcount(a), 0);  // lookup changed no ref
  p.ref(a);
  expect_stats(p, 2, 0, 1, 0);
  EXPECT_TRUE(p.has_hash(a));
}

TEST(BlockPool, OneBlockPerHash) {
  BlockPool p(3);
  const BlockId a = p.allocate(), b = p.allocate();
  ASSERT_TRUE(p.register_hash(a, 5));
  EXPECT_FALSE(p.register_hash(b, 5));  // the caller keeps b, unshared and unhashed
  EXPECT_FALSE(p.has_hash(b));
  EXPECT_EQ(p.lookup(5), a);
  p.unref(b);  // unhashed: free, not cached
  expect_stats(p, 2, 0, 1, 0);
  p.unref(a);
  expect_stats(p, 2, 1, 0, 0);
}

TEST(BlockPool, DropHashLetsTheHolderWriteAndForgetsTheHash) {
  BlockPool p(2);
  const BlockId a = p.allocate();
  ASSERT_TRUE(p.register_hash(a, 3));
  p.drop_hash(a);
  EXPECT_FALSE(p.has_hash(a));
  EXPECT_EQ(p.lookup(3), -1);
  const BlockId b = p.allocate();
  EXPECT_TRUE(p.register_hash(b, 3));  // the hash is free for another block now
  p.unref(a);
  expect_stats(p, 1, 0, 1, 0);
}

TEST(BlockPool, FreeBlocksGoBeforeCachedOnesAndEvictionIsLeastRecentlyReleased) {
  BlockPool p(5);
  std::vector<BlockId> b;
  for (int i = 0; i < 5; ++i) b.push_back(p.allocate());
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(p.register_hash(b[i], BlockHash(100 + i)));
  // Release order: 2, 0, 4 (unhashed: free), 3, 1.
  for (int i : {2, 0, 4, 3, 1}) p.unref(b[i]);
  expect_stats(p, 1, 4, 0, 0);
  EXPECT_EQ(p.allocate(), b[4]);  // the free block first, no eviction
  EXPECT_EQ(p.stats().n_evictions, 0);
  // Block 3 is revived by a hit: it leaves the LRU list and is not evicted.
  p.ref(b[3]);
  EXPECT_EQ(p.allocate(), b[2]);  // the least recently released
  EXPECT_EQ(p.lookup(102), -1);   // its hash is gone
  EXPECT_FALSE(p.has_hash(b[2]));
  EXPECT_EQ(p.allocate(), b[0]);
  EXPECT_EQ(p.allocate(), b[1]);
  EXPECT_EQ(p.allocate(), -1);    // b[3] is in use
  EXPECT_EQ(p.lookup(103), b[3]);
  EXPECT_EQ(p.stats().n_evictions, 3);
  expect_stats(p, 0, 0, 5, 0);
  // Re-released, block 3 goes to the back of the LRU list.
  p.unref(b[3]);
  p.unref(b[0]);
  EXPECT_EQ(p.allocate(), b[0]);  // unhashed after eviction: it went to the free list
  EXPECT_EQ(p.allocate(), b[3]);
}

// Every operation is O(1): 200k blocks through allocate / hash / release / evict / hit would take
// minutes if any of them scanned the pool.
TEST(BlockPool, ScalesToManyBlocks) {
  const int n = 200000;
  BlockPool p(n);
  for (int i = 0; i < n; ++i) {
    const BlockId b = p.allocate();
    ASSERT_TRUE(p.register_hash(b, BlockHash(i) * 0x9E3779B97F4A7C15ull));
  }
  for (BlockId b = 0; b < n; ++b) p.unref(b);
  EXPECT_EQ(p.stats().n_cached_idle, n);
  for (int i = 0; i < n / 2; ++i) p.ref(p.lookup(BlockHash(2 * i + 1) * 0x9E3779B97F4A7C15ull));  // odd: hits
  for (int i = 0; i < n / 2; ++i) ASSERT_EQ(p.allocate(), 2 * i);  // evicts the even ones, oldest first
  EXPECT_EQ(p.allocate(), -1);
  EXPECT_EQ(p.stats().n_evictions, n / 2);
  p.verify();
}

}  // namespace
}  // namespace polykv
