// StateCheckpointCache (kv/state_checkpoints.h) and the prefix-hit predicate of KvSequenceManager
// (`usable_end`), without a model: fake recurrent states whose floats are set by hand.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "kv/kv_sequence_manager.h"
#include "kv/state_checkpoints.h"
#include "scarce_memory.h"

namespace polykv {
namespace {

RecurrentShape shape() {
  RecurrentShape s;
  s.n_layer = 2;
  s.conv_kernel = 4;
  s.n_k_heads = 1;
  s.n_v_heads = 2;
  s.head_dim = 4;
  return s;
}

// Runs one "step" of n rows that writes `value + i` into every float of the next slot, then commits.
void fake_step(RecurrentState& r, int n, float value) {
  r.begin_step(r.n_tokens(), n);
  for (int l = 0; l < r.shape().n_layer; ++l) {
    float* c = r.next_conv(l);
    for (size_t i = 0; i < r.shape().conv_floats(); ++i) c[i] = value + float(i) + 1000.0f * float(l);
    float* m = r.next_ssm(l);
    for (size_t i = 0; i < r.shape().ssm_floats(); ++i) m[i] = -value - float(i) - 1000.0f * float(l);
  }
  r.commit(r.n_tokens() + n);
}

std::vector<float> current(const RecurrentState& r) {
  std::vector<float> out;
  for (int l = 0; l < r.shape().n_layer; ++l) {
    out.insert(out.end(), r.conv(l), r.conv(l) + r.shape().conv_floats());
    out.insert(out.end(), r.ssm(l), r.ssm(l) + r.shape().ssm_floats());
  }
  return out;
}

TEST(StateCheckpoints, RestoreGivesTheSavedStateAndPosition) {
  RecurrentState r(shape());
  StateCheckpointCache cache(shape(), host_kv_memory(), 4);
  fake_step(r, 16, 1.5f);
  const std::vector<float> at16 = current(r);
  EXPECT_TRUE(cache.save(11, r));
  EXPECT_TRUE(cache.contains(11));
  EXPECT_EQ(cache.position(11), 16);
  EXPECT_EQ(cache.position(12), -1);
  fake_step(r, 16, 7.0f);
  ASSERT_NE(current(r), at16);
  RecurrentState other(shape());
  cache.restore(11, other);
  EXPECT_EQ(other.n_tokens(), 16);
  EXPECT_EQ(current(other), at16);
  // A restored state steps on like any other, and cannot be rolled back past its checkpoint.
  fake_step(other, 3, 2.0f);
  EXPECT_EQ(other.n_tokens(), 19);
  EXPECT_THROW(other.truncate(10), Error);
  other.truncate(16);  // the start of its last step: still there
  EXPECT_EQ(current(other), at16);
}

TEST(StateCheckpoints, LeastRecentlyUsedIsEvictedAndItsSlotReused) {
  RecurrentState r(shape());
  StateCheckpointCache cache(shape(), host_kv_memory(), 2);
  fake_step(r, 4, 1.0f);
  ASSERT_TRUE(cache.save(1, r));
  fake_step(r, 4, 2.0f);
  ASSERT_TRUE(cache.save(2, r));
  const std::vector<float> at8 = current(r);
  RecurrentState s(shape());
  cache.restore(1, s);  // 1 is now the most recently used
  fake_step(r, 4, 3.0f);
  ASSERT_TRUE(cache.save(3, r));
  EXPECT_EQ(cache.size(), 2);
  EXPECT_EQ(cache.n_evictions(), 1);
  EXPECT_TRUE(cache.contains(1));
  EXPECT_FALSE(cache.contains(2));
  EXPECT_TRUE(cache.contains(3));
  EXPECT_THROW(cache.restore(2, s), Error);
  // Saving an existing hash refreshes its place and changes nothing else (same prefix, same state).
  ASSERT_TRUE(cache.save(1, r));
  EXPECT_EQ(cache.position(1), 4);
  fake_step(r, 4, 4.0f);
  ASSERT_TRUE(cache.save(4, r));  // evicts 3, not the refreshed 1
  EXPECT_TRUE(cache.contains(1));
  EXPECT_FALSE(cache.contains(3));
  EXPECT_EQ(cache.n_evictions(), 2);
  (void)at8;
}

// Anchors (a prompt's last full block, a divergence point) outlive plain chunk ends: plain saves evict only
// plain checkpoints, an anchor evicts a plain one first, then the oldest anchor.
TEST(StateCheckpoints, PlainChunkEndsNeverFlushAnchors) {
  RecurrentState r(shape());
  StateCheckpointCache cache(shape(), host_kv_memory(), 3);
  fake_step(r, 4, 1.0f);
  ASSERT_TRUE(cache.save(1, r, /*anchor=*/true));
  fake_step(r, 4, 2.0f);
  ASSERT_TRUE(cache.save(2, r));
  fake_step(r, 4, 3.0f);
  ASSERT_TRUE(cache.save(3, r));
  fake_step(r, 4, 4.0f);
  ASSERT_TRUE(cache.save(4, r));  // evicts plain 2, not the older anchor 1
  EXPECT_TRUE(cache.contains(1) && !cache.contains(2) && cache.contains(3) && cache.contains(4));
  EXPECT_TRUE(cache.is_anchor(1));
  EXPECT_FALSE(cache.is_anchor(3));
  ASSERT_TRUE(cache.save(3, r, /*anchor=*/true));  // promoted (its state is the one saved first)
  EXPECT_TRUE(cache.is_anchor(3));
  EXPECT_EQ(cache.position(3), 12);
  EXPECT_EQ(cache.n_anchors(), 2);
  fake_step(r, 4, 5.0f);
  ASSERT_TRUE(cache.save(5, r, /*anchor=*/true));  // evicts plain 4 first
  EXPECT_FALSE(cache.contains(4));
  EXPECT_EQ(cache.n_anchors(), 3);
  fake_step(r, 4, 6.0f);
  EXPECT_FALSE(cache.save(6, r));  // a plain save into a cache full of anchors: nothing
  EXPECT_FALSE(cache.contains(6));
  ASSERT_TRUE(cache.save(7, r, /*anchor=*/true));  // evicts the least recently used anchor, 1
  EXPECT_FALSE(cache.contains(1));
  EXPECT_TRUE(cache.contains(3) && cache.contains(5) && cache.contains(7));
  EXPECT_EQ(cache.n_evictions(), 3);
}

TEST(StateCheckpoints, CapacityZeroSavesNothing) {
  RecurrentState r(shape());
  StateCheckpointCache cache(shape(), host_kv_memory(), 0);
  fake_step(r, 4, 1.0f);
  EXPECT_FALSE(cache.save(1, r));
  EXPECT_FALSE(cache.contains(1));
  EXPECT_EQ(cache.size(), 0);
}

using test::ScarceMemory;

TEST(StateCheckpoints, RefusedMemoryReusesTheOldestSlotOrSavesNothing) {
  ScarceMemory mem(3);  // the state's two slots and its log
  RecurrentState r(shape(), mem);
  StateCheckpointCache cache(shape(), mem, 4);
  fake_step(r, 4, 1.0f);
  EXPECT_FALSE(cache.save(1, r));  // no slot to be had, none to reuse
  EXPECT_EQ(cache.size(), 0);
  // One slot free: the first save takes it, the second reuses it (evicting the first).
  ScarceMemory mem2(4);
  RecurrentState r2(shape(), mem2);
  StateCheckpointCache cache2(shape(), mem2, 4);
  fake_step(r2, 4, 1.0f);
  EXPECT_TRUE(cache2.save(1, r2));
  fake_step(r2, 4, 2.0f);
  const std::vector<float> at8 = current(r2);
  EXPECT_TRUE(cache2.save(2, r2));
  EXPECT_EQ(cache2.size(), 1);
  EXPECT_FALSE(cache2.contains(1));
  RecurrentState back(shape(), host_kv_memory());
  EXPECT_THROW(cache2.restore(2, back), Error);  // another memory
  fake_step(r2, 4, 3.0f);
  cache2.restore(2, r2);
  EXPECT_EQ(current(r2), at8);
  EXPECT_EQ(r2.n_tokens(), 8);
}

TEST(StateCheckpoints, MismatchesAreErrors) {
  RecurrentShape other = shape();
  other.head_dim = 8;
  RecurrentState r(other);
  StateCheckpointCache cache(shape(), host_kv_memory(), 2);
  fake_step(r, 4, 1.0f);
  EXPECT_THROW(cache.save(1, r), Error);
  EXPECT_THROW(StateCheckpointCache(shape(), host_kv_memory(), -1), Error);
  EXPECT_THROW(StateCheckpointCache(RecurrentShape{}, host_kv_memory(), 2), Error);
  EXPECT_EQ(StateCheckpointCache::bytes_for(shape(), 3), 3 * RecurrentState::slot_bytes_for(shape()));
  RecurrentState s(shape());
  EXPECT_EQ(s.slot_bytes(), RecurrentState::slot_bytes_for(shape()));
  s.begin_step(0, 2);
  EXPECT_THROW(cache.save(1, s), Error);  // not between steps
}

// ---- KvSequenceManager: a hit ends only where usable_end says ----

std::vector<int32_t> iota_tokens(int n, int32_t first = 100) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

const BlockHash kSeed = prefix_hash_seed("model", "q8_0/turbo3t", "");

TEST(KvSequenceManagerUsableEnd, HitEndsOnTheLastUsableMatchedBlock) {
  KvSequenceManager m(32, 4);
  const auto prompt = iota_tokens(21);  // 5 full blocks + 1 token
  ASSERT_EQ(m.add_sequence(1, prompt, kSeed), 0);
  std::vector<KvSequenceManager::BlockCopy> copies;
  ASSERT_TRUE(m.reserve(1, 21, copies));
  m.mark_computed(1, 21);
  std::vector<BlockHash> h;
  for (int k = 0; k < 5; ++k) h.push_back(m.chain_hash(1, k));
  EXPECT_THROW(m.chain_hash(1, 5), Error);
  EXPECT_THROW(m.chain_hash(1, -1), Error);
  EXPECT_EQ(m.pool().lookup(h[4]), m.block_table(1)[4]);

  // Checkpoints after blocks 1 and 3 (8 and 16 tokens): the hit is 16 tokens, not the 20 cached.
  auto usable = [&](BlockHash x) { return x == h[1] || x == h[3]; };
  EXPECT_EQ(m.cached_prefix_tokens(prompt, kSeed), 20);
  EXPECT_EQ(m.cached_prefix_tokens(prompt, kSeed, usable), 16);
  EXPECT_EQ(m.cached_chain_tokens(h, usable), 16);  // the same from the chain
  EXPECT_EQ(m.cached_chain_tokens(h), 20);
  EXPECT_EQ(m.cached_chain_tokens(std::span(h).first(3), usable), 8);
  EXPECT_EQ(m.blocks_to_admit(prompt, kSeed, usable), 6 - 4);
  ASSERT_EQ(m.add_sequence(2, prompt, kSeed, usable), 16);
  EXPECT_EQ(m.n_computed(2), 16);
  ASSERT_EQ(m.block_table(2).size(), 4u);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(m.block_table(2)[size_t(k)], m.block_table(1)[size_t(k)]);
  EXPECT_EQ(m.pool().refcount(m.block_table(1)[4]), 1);  // the block past the hit is not referenced
  EXPECT_EQ(m.chain_hash(2, 3), h[3]);
  // A prompt that diverges inside block 3: its hit can only end after block 1.
  auto diverged = prompt;
  diverged[14] = 7;
  EXPECT_EQ(m.cached_prefix_tokens(diverged, kSeed, usable), 8);
  // No usable end: no hit. The manager's own count of hits follows the cut.
  EXPECT_EQ(m.add_sequence(3, prompt, kSeed, [](BlockHash) { return false; }), 0);
  EXPECT_EQ(m.prefix_stats().n_hit_tokens, 16);
  // The recomputed blocks of sequence 2 stay private (their hashes are held by sequence 1's).
  ASSERT_TRUE(m.reserve(2, 5, copies));
  m.mark_computed(2, 21);
  EXPECT_FALSE(m.pool().has_hash(m.block_table(2)[4]));
  EXPECT_EQ(m.chain_hash(2, 4), h[4]);
  m.pool().verify();
}

}  // namespace
}  // namespace polykv
