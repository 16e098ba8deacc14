// KvSequenceManager (kv/kv_sequence_manager.h) with fake requests: prefix hits and their limits,
// the one-block-per-hash policy, eviction, salts, fork + copy-on-write, rollback, release, misuse.
// The randomized model check is in kv_sequence_manager_random_test.cpp.
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "kv/kv_sequence_manager.h"

namespace polykv {
namespace {

using Seqs = KvSequenceManager;
using Copies = std::vector<Seqs::BlockCopy>;

std::vector<int32_t> iota_tokens(int n, int32_t first = 100) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

std::vector<BlockId> table(const Seqs& m, Seqs::SeqId s) {
  auto t = m.block_table(s);
  return {t.begin(), t.end()};
}

// Reserves and marks every known token of s computed; returns the copies reserve asked for.
Copies compute_all(Seqs& m, Seqs::SeqId s) {
  Copies c;
  const int n = m.n_tokens(s) - m.n_computed(s);
  EXPECT_TRUE(m.reserve(s, n, c));
  m.mark_computed(s, m.n_tokens(s));
  return c;
}

const BlockHash kSeed = prefix_hash_seed("model", "q8_0/turbo3", "");

TEST(KvSequenceManager, PromptOfWholeBlocksRecomputesItsLastBlock) {
  Seqs m(16, 4);
  const auto prompt = iota_tokens(8);
  EXPECT_EQ(m.add_sequence(1, prompt, kSeed), 0);
  EXPECT_TRUE(compute_all(m, 1).empty());
  const auto t1 = table(m, 1);
  ASSERT_EQ(t1.size(), 2u);
  EXPECT_TRUE(m.pool().has_hash(t1[0]) && m.pool().has_hash(t1[1]));
  // Same prompt: both blocks are cached but the last token must be computed, so one block hits.
  EXPECT_EQ(m.cached_prefix_tokens(prompt, kSeed), 4);
  ASSERT_EQ(m.add_sequence(2, prompt, kSeed), 4);
  EXPECT_EQ(m.n_computed(2), 4);
  EXPECT_EQ(m.block_table(2)[0], t1[0]);
  EXPECT_EQ(m.pool().refcount(t1[0]), 2);
  EXPECT_EQ(m.blocks_needed(2, 4), 1);
  EXPECT_TRUE(compute_all(m, 2).empty());
  // Its own last block holds the same content, but the hash is t1[1]'s: it stays private.
  const BlockId own = m.block_table(2)[1];
  EXPECT_NE(own, t1[1]);
  EXPECT_FALSE(m.pool().has_hash(own));
  EXPECT_EQ(m.pool().refcount(t1[1]), 1);
  EXPECT_EQ(m.pool().lookup(m.pool().hash(t1[1])), t1[1]);
  m.free(2);  // its private block goes back to free, not to the cache
  EXPECT_EQ(m.pool().stats().n_free, 16 - 2);
  EXPECT_EQ(m.pool().stats().n_cached_idle, 0);
}

TEST(KvSequenceManager, HitCoversAllButTheLastToken) {
  Seqs m(16, 4);
  const auto prompt = iota_tokens(9);
  m.add_sequence(1, prompt, kSeed);
  compute_all(m, 1);
  ASSERT_EQ(m.add_sequence(2, prompt, kSeed), 8);
  const auto t1 = table(m, 1);
  EXPECT_EQ(table(m, 2), std::vector<BlockId>(t1.begin(), t1.begin() + 2));
  EXPECT_EQ(m.blocks_needed(2, 1), 1);  // a fresh block for position 8: 1's partial block is unhashed
  Copies c;
  ASSERT_TRUE(m.reserve(2, 1, c));
  EXPECT_TRUE(c.empty());
  ASSERT_EQ(m.block_table(2).size(), 3u);
  EXPECT_NE(m.block_table(2)[2], m.block_table(1)[2]);
  const auto& ps = m.prefix_stats();
  EXPECT_EQ(ps.n_queries, 2);
  EXPECT_EQ(ps.n_query_tokens, 18);
  EXPECT_EQ(ps.n_hit_tokens, 8);
}

TEST(KvSequenceManager, SecondRequestHitsOnlyAfterTheFirstMarksComputed) {
  Seqs m(16, 4);
  const auto prompt = iota_tokens(13);
  m.add_sequence(1, prompt, kSeed);
  Copies c;
  ASSERT_TRUE(m.reserve(1, 13, c));
  EXPECT_EQ(m.add_sequence(2, prompt, kSeed), 0);  // reserved is not computed: nothing to share yet
  m.mark_computed(1, 6);                           // one full block so far (chunked prefill)
  EXPECT_EQ(m.add_sequence(3, prompt, kSeed), 4);
  m.mark_computed(1, 13);
  EXPECT_EQ(m.add_sequence(4, prompt, kSeed), 12);
  // 2 computes the same prefix on its own: its full blocks stay private (their hashes are taken).
  compute_all(m, 2);
  for (BlockId b : m.block_table(2)) EXPECT_FALSE(m.pool().has_hash(b));
  for (int k = 0; k < 3; ++k) EXPECT_EQ(m.pool().refcount(m.block_table(1)[size_t(k)]), k == 0 ? 3 : 2);
}

TEST(KvSequenceManager, EvictedPrefixMissesFromItsTailFirst) {
  Seqs m(4, 4);
  const auto prompt = iota_tokens(12);
  m.add_sequence(1, prompt, kSeed);
  compute_all(m, 1);  // 3 full hashed blocks
  const auto t1 = table(m, 1);
  m.free(1);          // released last to first: t1[2] is the least recently released
  EXPECT_EQ(m.pool().stats().n_cached_idle, 3);
  EXPECT_EQ(m.pool().n_available(), 4);
  m.add_sequence(2, iota_tokens(8, 500), kSeed);
  EXPECT_EQ(m.blocks_needed(2, 8), 2);
  Copies c;
  ASSERT_TRUE(m.reserve(2, 8, c));  // the free block, then one eviction
  EXPECT_EQ(m.pool().stats().n_evictions, 1);
  EXPECT_EQ(m.pool().lookup(block_hash(block_hash(block_hash(kSeed, std::span(prompt).first(4)),
                                                  std::span(prompt).subspan(4, 4)),
                                       std::span(prompt).subspan(8, 4))),
            -1);
  auto longer = prompt;
  longer.push_back(7);
  EXPECT_EQ(m.add_sequence(3, longer, kSeed), 8);  // the head of the chain survived
  EXPECT_EQ(table(m, 3), std::vector<BlockId>(t1.begin(), t1.begin() + 2));
  // No block left for 3's remaining 5 tokens (2 blocks): refused, nothing changed.
  const auto before = m.pool().stats();
  EXPECT_EQ(m.blocks_needed(3, 5), 2);
  EXPECT_FALSE(m.reserve(3, 5, c));
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(table(m, 3).size(), 2u);
  EXPECT_EQ(m.pool().stats().n_free, before.n_free);
  EXPECT_EQ(m.pool().stats().n_in_use, before.n_in_use);
  // Once 2 is gone, everything evicts and a later lookup of the old prefix misses entirely.
  m.free(3);
  m.free(2);
  m.add_sequence(4, iota_tokens(16, 900), kSeed);
  ASSERT_TRUE(m.reserve(4, 16, c));
  m.mark_computed(4, 16);
  EXPECT_EQ(m.cached_prefix_tokens(longer, kSeed), 0);
}

TEST(KvSequenceManager, DifferentSeedNeverShares) {
  Seqs m(16, 4);
  const auto prompt = iota_tokens(9);
  const BlockHash a = prefix_hash_seed("model", "q8_0/turbo3", "tenant-a");
  const BlockHash b = prefix_hash_seed("model", "q8_0/turbo3", "tenant-b");
  const BlockHash types = prefix_hash_seed("model", "f16/f16", "tenant-a");
  m.add_sequence(1, prompt, a);
  compute_all(m, 1);
  EXPECT_EQ(m.add_sequence(2, prompt, b), 0);
  EXPECT_EQ(m.add_sequence(3, prompt, types), 0);
  EXPECT_EQ(m.add_sequence(4, prompt, a), 8);
}

TEST(KvSequenceManager, ForkSharesThePartialBlockAndTheFirstWriterCopiesIt) {
  Seqs m(16, 4);
  m.add_sequence(1, iota_tokens(10), kSeed);  // a named pool: blocks 0, 1 full, 2 holds 2 rows
  compute_all(m, 1);
  const auto pool_table = table(m, 1);
  m.fork(2, 1);
  EXPECT_EQ(table(m, 2), pool_table);
  EXPECT_EQ(m.n_computed(2), 10);
  EXPECT_EQ(m.n_tokens(2), 10);
  for (BlockId b : pool_table) EXPECT_EQ(m.pool().refcount(b), 2);
  const std::vector<int32_t> next = {7};
  m.append_tokens(2, next);
  EXPECT_EQ(m.blocks_needed(2, 1), 1);
  Copies c;
  ASSERT_TRUE(m.reserve(2, 1, c));
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].src, pool_table[2]);
  EXPECT_EQ(c[0].dst, m.block_table(2)[2]);
  EXPECT_NE(c[0].dst, pool_table[2]);
  EXPECT_EQ(m.pool().refcount(pool_table[2]), 1);
  EXPECT_EQ(m.pool().refcount(c[0].dst), 1);
  EXPECT_EQ(m.block_table(2)[0], pool_table[0]);  // full blocks stay shared
  m.mark_computed(2, 11);
  // The parent is alone on its partial block again: it writes in place.
  m.append_tokens(1, next);
  c.clear();
  ASSERT_TRUE(m.reserve(1, 1, c));
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(table(m, 1), pool_table);
}

TEST(KvSequenceManager, ForkAtABlockBoundaryCopiesNothing) {
  Seqs m(16, 4);
  m.add_sequence(1, iota_tokens(8), kSeed);
  compute_all(m, 1);
  m.fork(2, 1);
  m.append_tokens(2, std::vector<int32_t>{1, 2});
  Copies c;
  ASSERT_TRUE(m.reserve(2, 2, c));
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(m.block_table(2).size(), 3u);
}

TEST(KvSequenceManager, ForkCancelsTheParentsReservationOfTheSharedBlock) {
  Seqs m(16, 4);
  m.add_sequence(1, iota_tokens(6), kSeed);
  Copies c;
  ASSERT_TRUE(m.reserve(1, 6, c));
  m.mark_computed(1, 5);  // position 5 reserved, not written yet
  m.fork(2, 1);           // 2 shares block 1 with rows 4
  EXPECT_THROW(m.mark_computed(1, 6), Error);  // 1 may not write the shared block
  ASSERT_TRUE(m.reserve(1, 1, c));
  ASSERT_EQ(c.size(), 1u);  // it copies it first
  m.mark_computed(1, 6);
  EXPECT_EQ(m.n_tokens(2), 6);
  EXPECT_EQ(m.n_computed(2), 5);
}

TEST(KvSequenceManager, FreeingAForkedChildLeavesTheParentIntact) {
  Seqs m(16, 4);
  m.add_sequence(1, iota_tokens(10), kSeed);
  compute_all(m, 1);
  const auto pool_table = table(m, 1);
  const auto stats = m.pool().stats();
  m.fork(2, 1);
  m.append_tokens(2, iota_tokens(5, 7));
  compute_all(m, 2);
  m.free(2);
  EXPECT_EQ(table(m, 1), pool_table);
  for (BlockId b : pool_table) EXPECT_EQ(m.pool().refcount(b), 1);
  EXPECT_EQ(m.pool().stats().n_in_use, stats.n_in_use);
  EXPECT_FALSE(m.has_sequence(2));
  EXPECT_THROW(m.free(2), Error);  // double free
  EXPECT_THROW(m.block_table(2), Error);
  m.pool().verify();
}

TEST(KvSequenceManager, TruncateReleasesBlocksAndAHashedBlockLosesItsHashBeforeItIsWritten) {
  Seqs m(16, 4);
  m.add_sequence(1, iota_tokens(10), kSeed);
  compute_all(m, 1);
  const auto t = table(m, 1);
  const BlockHash h1 = m.pool().hash(t[1]);
  m.truncate(1, 6);  // rejected draft tokens: position 6..9 go
  EXPECT_EQ(m.n_tokens(1), 6);
  EXPECT_EQ(m.n_computed(1), 6);
  EXPECT_EQ(table(m, 1), std::vector<BlockId>(t.begin(), t.begin() + 2));
  EXPECT_EQ(m.pool().refcount(t[2]), 0);     // unhashed: free again
  EXPECT_EQ(m.pool().lookup(h1), t[1]);      // rows 0..3 of block 1 are still valid: still findable
  m.append_tokens(1, std::vector<int32_t>{1, 2, 3});
  Copies c;
  ASSERT_TRUE(m.reserve(1, 3, c));
  EXPECT_TRUE(c.empty());                    // ref 1: written in place, its hash dropped
  EXPECT_EQ(m.block_table(1)[1], t[1]);
  EXPECT_FALSE(m.pool().has_hash(t[1]));
  EXPECT_EQ(m.pool().lookup(h1), -1);
  m.mark_computed(1, 9);                     // block 1 is full again, with new content
  EXPECT_TRUE(m.pool().has_hash(t[1]));
  EXPECT_NE(m.pool().hash(t[1]), h1);
  m.truncate(1, 4);                          // to a block boundary: blocks 1, 2 released
  EXPECT_EQ(table(m, 1), std::vector<BlockId>{t[0]});
  EXPECT_EQ(m.pool().refcount(t[1]), 0);
  EXPECT_EQ(m.pool().stats().n_cached_idle, 1);  // block 1 (hashed) stays findable, LRU
  m.truncate(1, 0);
  EXPECT_TRUE(m.block_table(1).empty());
  EXPECT_EQ(m.pool().stats().n_in_use, 0);
}

TEST(KvSequenceManager, TruncateIntoASharedHashedBlockCopiesItOnTheNextWrite) {
  Seqs m(16, 4);
  const auto prompt = iota_tokens(9);
  m.add_sequence(1, prompt, kSeed);
  compute_all(m, 1);
  ASSERT_EQ(m.add_sequence(2, prompt, kSeed), 8);
  const auto t = table(m, 1);
  m.truncate(1, 6);
  m.append_tokens(1, std::vector<int32_t>{5});
  Copies c;
  ASSERT_TRUE(m.reserve(1, 1, c));
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].src, t[1]);
  EXPECT_EQ(m.block_table(1)[1], c[0].dst);
  EXPECT_TRUE(m.pool().has_hash(t[1]));  // 2 still reads it, unchanged and findable
  EXPECT_FALSE(m.pool().has_hash(c[0].dst));
  EXPECT_EQ(m.pool().refcount(t[1]), 1);
}

TEST(KvSequenceManager, AdmissionEstimates) {
  Seqs m(8, 4);
  const auto prompt = iota_tokens(13);
  EXPECT_EQ(m.blocks_to_admit(prompt, kSeed), 4);
  m.add_sequence(1, prompt, kSeed);
  compute_all(m, 1);
  EXPECT_EQ(m.blocks_to_admit(prompt, kSeed), 1);  // 3 hits on blocks in use cost nothing
  m.free(1);
  EXPECT_EQ(m.blocks_to_admit(prompt, kSeed), 4);  // cached-idle hits take available blocks
  const int avail = m.pool().n_available();
  m.add_sequence(2, prompt, kSeed);
  Copies c;
  ASSERT_TRUE(m.reserve(2, 1, c));
  EXPECT_EQ(avail - m.pool().n_available(), 4);
}

TEST(KvSequenceManager, MisuseThrowsAndChangesNothing) {
  EXPECT_THROW(Seqs(4, 0), Error);
  Seqs m(8, 4);
  m.add_sequence(1, iota_tokens(5), kSeed);
  Copies c;
  EXPECT_THROW(m.add_sequence(1, iota_tokens(5), kSeed), Error);
  EXPECT_THROW(m.reserve(1, 6, c), Error);  // past the known tokens
  EXPECT_THROW(m.reserve(1, -1, c), Error);
  EXPECT_THROW(m.reserve(9, 1, c), Error);
  EXPECT_THROW(m.mark_computed(1, 1), Error);  // nothing reserved
  ASSERT_TRUE(m.reserve(1, 5, c));
  m.mark_computed(1, 5);
  EXPECT_THROW(m.mark_computed(1, 4), Error);  // backwards: truncate is the way back
  EXPECT_THROW(m.truncate(1, 6), Error);
  EXPECT_THROW(m.truncate(1, -1), Error);
  EXPECT_THROW(m.fork(1, 1), Error);
  EXPECT_THROW(m.fork(2, 3), Error);
  EXPECT_THROW(m.append_tokens(4, iota_tokens(1)), Error);
  EXPECT_EQ(m.n_computed(1), 5);
  EXPECT_EQ(m.pool().stats().n_in_use, 2);
  m.free(1);
  EXPECT_THROW(m.free(1), Error);
  EXPECT_EQ(m.pool().stats().n_in_use, 0);
  m.pool().verify();
}

TEST(KvSequenceManager, EmptyPromptAndZeroReservations) {
  Seqs m(4, 4);
  EXPECT_EQ(m.add_sequence(1, {}, kSeed), 0);
  Copies c;
  EXPECT_TRUE(m.reserve(1, 0, c));
  EXPECT_TRUE(m.block_table(1).empty());
  m.append_tokens(1, iota_tokens(1));
  EXPECT_TRUE(m.reserve(1, 1, c));
  EXPECT_EQ(m.block_table(1).size(), 1u);
}

}  // namespace
}  // namespace polykv
