// KvSequenceManager under thousands of random operations (add with prompts drawn from a few shared
// prefixes and two salts, fork, append/reserve/write/mark_computed, truncate, free) checked against
// a simple model after every operation. A fake KV store holds, for every (block, row), a fingerprint
// of the sequence's whole prefix up to that position (what real K/V depends on): every sequence must
// read back its own fingerprints at all its computed positions, so a wrong hit, a missed copy or a
// write into a shared block shows up as a wrong fingerprint.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <random>
#include <vector>

#include "kv/kv_sequence_manager.h"

namespace polykv {
namespace {

using Seqs = KvSequenceManager;

struct ModelSeq {
  std::vector<int32_t> tokens;
  BlockHash seed = 0;
};

// Fingerprint of position p: depends on the seed and every token in [0, p].
uint64_t fingerprint(uint64_t prev, int32_t token) {
  uint64_t x = (prev ^ uint64_t(uint32_t(token))) * 0x9E3779B97F4A7C15ull;
  return x ^ (x >> 29);
}

std::vector<uint64_t> fingerprints(const ModelSeq& s) {
  std::vector<uint64_t> f(s.tokens.size());
  uint64_t h = s.seed;
  for (size_t p = 0; p < f.size(); ++p) f[p] = h = fingerprint(h, s.tokens[p]);
  return f;
}

struct Counters {
  int hits = 0, copies = 0, refused = 0, forks = 0, truncates = 0, writes = 0;
  int64_t evictions = 0;
};

class Sim {
 public:
  Sim(int n_blocks, int bt, uint32_t rng_seed)
      : m_(n_blocks, bt), bt_(bt), store_(size_t(n_blocks), std::vector<uint64_t>(size_t(bt), 0)), rng_(rng_seed) {
    for (int i = 0; i < 3; ++i) {  // shared prefixes ("documents"), tokens from a small alphabet
      std::vector<int32_t> d(size_t(5 * bt + 3));
      for (auto& t : d) t = int32_t(rng_() % 5);
      bases_.push_back(d);
    }
  }

  void run(int n_ops) {
    for (int op = 0; op < n_ops; ++op) {
      const int r = pick(100);
      if (model_.empty() || r < 18) add();
      else if (r < 26) fork();
      else if (r < 80) step(any());
      else if (r < 90) truncate(any());
      else free(any());
      check_all();
      if (::testing::Test::HasFailure()) {
        ADD_FAILURE() << "first failure after op " << op;
        return;
      }
    }
    while (!model_.empty()) free(model_.begin()->first);
    const auto s = m_.pool().stats();
    counters.evictions = s.n_evictions;
    EXPECT_EQ(s.n_in_use, 0);
    EXPECT_EQ(s.n_free + s.n_cached_idle, s.n_blocks);
    m_.pool().verify();
  }

  Counters counters;

 private:
  int pick(int n) { return int(rng_() % uint32_t(n)); }
  Seqs::SeqId any() {
    auto it = model_.begin();
    std::advance(it, pick(int(model_.size())));
    return it->first;
  }

  void add() {
    if (model_.size() >= 12) return free(any());
    ModelSeq s;
    s.seed = pick(4) == 0 ? 222 : 111;  // a second tenant salt: must never share with the first
    const auto& base = bases_[size_t(pick(int(bases_.size())))];
    const int prefix = pick(int(base.size()) + 1);
    s.tokens.assign(base.begin(), base.begin() + prefix);
    for (int i = pick(2 * bt_ + 1); i > 0; --i) s.tokens.push_back(int32_t(pick(3)));
    const int expect_cached = m_.cached_prefix_tokens(s.tokens, s.seed);
    const int admit = m_.blocks_to_admit(s.tokens, s.seed);
    const int avail = m_.pool().n_available();
    const Seqs::SeqId id = next_id_++;
    const int cached = m_.add_sequence(id, s.tokens, s.seed);
    EXPECT_EQ(cached, expect_cached);
    EXPECT_EQ(cached % bt_, 0);
    EXPECT_LE(cached, s.tokens.empty() ? 0 : int(s.tokens.size() - 1) / bt_ * bt_);
    counters.hits += cached > 0;
    model_[id] = s;
    if (pick(2) == 0) {  // whole-prompt admission: uses exactly what blocks_to_admit said
      std::vector<Seqs::BlockCopy> copies;
      const int n = int(s.tokens.size()) - cached;
      if (m_.reserve(id, n, copies)) {
        EXPECT_TRUE(copies.empty());
        EXPECT_EQ(avail - m_.pool().n_available(), admit);
        write(id, n, copies);
      } else {
        EXPECT_GT(admit, avail);
        free(id);
      }
    }
  }

  void fork() {
    if (model_.size() >= 12) return;
    const Seqs::SeqId parent = any(), child = next_id_++;
    m_.fork(child, parent);
    model_[child] = model_[parent];
    ++counters.forks;
  }

  // One engine step for seq: maybe append tokens, reserve a chunk, copy, write, mark computed.
  void step(Seqs::SeqId id) {
    ModelSeq& s = model_[id];
    if (int(s.tokens.size()) == m_.n_computed(id) || pick(4) == 0) {
      std::vector<int32_t> add(size_t(1 + pick(3)));
      for (auto& t : add) t = int32_t(pick(3));
      m_.append_tokens(id, add);
      s.tokens.insert(s.tokens.end(), add.begin(), add.end());
    }
    const int pending = int(s.tokens.size()) - m_.n_computed(id);
    const int n = 1 + pick(std::min(pending, 3 * bt_));
    const int needed = m_.blocks_needed(id, n), avail = m_.pool().n_available();
    const std::vector<BlockId> before(m_.block_table(id).begin(), m_.block_table(id).end());
    const auto stats_before = m_.pool().stats();
    std::vector<Seqs::BlockCopy> copies;
    const bool ok = m_.reserve(id, n, copies);
    EXPECT_EQ(ok, needed <= avail);
    if (!ok) {  // nothing changed; the scheduler preempts the sequence (recomputed later)
      EXPECT_TRUE(copies.empty());
      EXPECT_EQ(std::vector<BlockId>(m_.block_table(id).begin(), m_.block_table(id).end()), before);
      EXPECT_EQ(m_.pool().stats().n_in_use, stats_before.n_in_use);
      ++counters.refused;
      return free(id);
    }
    EXPECT_EQ(avail - m_.pool().n_available(), needed);
    write(id, n, copies);
  }

  // Performs the copies, then writes fingerprints of [n_computed, n_computed + n): every written
  // block must be exclusively ours and unhashed. Usually marks them computed.
  void write(Seqs::SeqId id, int n, const std::vector<Seqs::BlockCopy>& copies) {
    for (const auto& c : copies) {
      EXPECT_EQ(m_.pool().refcount(c.dst), 1);
      store_[size_t(c.dst)] = store_[size_t(c.src)];
      ++counters.copies;
    }
    const auto f = fingerprints(model_[id]);
    const auto table = m_.block_table(id);
    const int from = m_.n_computed(id);
    for (int p = from; p < from + n; ++p) {
      const BlockId b = table[size_t(p / bt_)];
      ASSERT_EQ(m_.pool().refcount(b), 1) << "write into shared block " << b;
      ASSERT_FALSE(m_.pool().has_hash(b)) << "write into hashed block " << b;
      store_[size_t(b)][size_t(p % bt_)] = f[size_t(p)];
    }
    ++counters.writes;
    if (pick(8) != 0) m_.mark_computed(id, from + (pick(4) == 0 ? pick(n + 1) : n));
  }

  void truncate(Seqs::SeqId id) {
    ModelSeq& s = model_[id];
    const int n = std::max(0, int(s.tokens.size()) - (pick(3) == 0 ? pick(int(s.tokens.size()) + 1) : 1 + pick(4)));
    m_.truncate(id, n);
    s.tokens.resize(size_t(n));
    ++counters.truncates;
  }

  void free(Seqs::SeqId id) {
    m_.free(id);
    model_.erase(id);
  }

  // The model's invariants, after every operation.
  void check_all() {
    const BlockPool& pool = m_.pool();
    pool.verify();
    std::vector<int> refs(size_t(pool.n_blocks()), 0);
    for (const auto& [id, s] : model_) {
      const auto table = m_.block_table(id);
      const int nc = m_.n_computed(id), nt = m_.n_tokens(id);
      ASSERT_EQ(nt, int(s.tokens.size()));
      ASSERT_TRUE(std::equal(s.tokens.begin(), s.tokens.end(), m_.tokens(id).begin()));
      ASSERT_LE(nc, nt);
      ASSERT_GE(int(table.size()), (nc + bt_ - 1) / bt_);
      ASSERT_LE(int(table.size()), (nt + bt_ - 1) / bt_);
      for (BlockId b : table) ++refs[size_t(b)];
      // Every computed position reads back this sequence's own K/V.
      const auto f = fingerprints(s);
      for (int p = 0; p < nc; ++p)
        ASSERT_EQ(store_[size_t(table[size_t(p / bt_)])][size_t(p % bt_)], f[size_t(p)])
            << "sequence " << id << " position " << p;
      // A hashed full computed block holds exactly the chain hash of this prefix.
      BlockHash h = s.seed;
      for (int k = 0; k < nc / bt_; ++k) {
        h = block_hash(h, std::span(s.tokens).subspan(size_t(k * bt_), size_t(bt_)));
        const BlockId b = table[size_t(k)];
        if (pool.has_hash(b)) {
          ASSERT_EQ(pool.hash(b), h) << "sequence " << id << " block " << k;
        }
      }
    }
    int in_use = 0, shared = 0, idle = 0;
    for (BlockId b = 0; b < pool.n_blocks(); ++b) {
      ASSERT_EQ(pool.refcount(b), refs[size_t(b)]) << "block " << b;
      in_use += refs[size_t(b)] > 0;
      shared += refs[size_t(b)] > 1;
      idle += refs[size_t(b)] == 0 && pool.has_hash(b);
    }
    const auto st = pool.stats();
    ASSERT_EQ(st.n_in_use, in_use);
    ASSERT_EQ(st.n_shared, shared);
    ASSERT_EQ(st.n_cached_idle, idle);
    ASSERT_EQ(st.n_free + st.n_cached_idle + st.n_in_use, st.n_blocks);
  }

  Seqs m_;
  int bt_;
  std::vector<std::vector<uint64_t>> store_;  // [n_blocks][block_tokens] fingerprints
  std::mt19937 rng_;
  std::vector<std::vector<int32_t>> bases_;
  std::map<Seqs::SeqId, ModelSeq> model_;
  Seqs::SeqId next_id_ = 1;
};

TEST(KvSequenceManagerRandom, ModelHoldsAfterEveryOperation) {
  struct Config {
    int n_blocks, bt;
  };
  Counters total;
  // Tight pools (refusals, evictions), roomy ones (long-lived cache), 1-token and odd block sizes.
  for (Config c : {Config{12, 4}, Config{24, 4}, Config{200, 4}, Config{40, 1}, Config{20, 5}}) {
    for (uint32_t seed = 1; seed <= 4; ++seed) {
      SCOPED_TRACE(::testing::Message() << "n_blocks " << c.n_blocks << " bt " << c.bt << " seed " << seed);
      Sim sim(c.n_blocks, c.bt, seed);
      sim.run(1500);
      if (::testing::Test::HasFatalFailure() || ::testing::Test::HasFailure()) return;
      total.hits += sim.counters.hits;
      total.copies += sim.counters.copies;
      total.refused += sim.counters.refused;
      total.forks += sim.counters.forks;
      total.truncates += sim.counters.truncates;
      total.evictions += sim.counters.evictions;
    }
  }
  std::printf("random walk: %d hits, %d copies, %d refused, %d forks, %d truncates, %lld evictions\n", total.hits,
              total.copies, total.refused, total.forks, total.truncates, (long long)total.evictions);
  // The walk reached every interesting case (else the test proves little).
  EXPECT_GT(total.hits, 100);
  EXPECT_GT(total.copies, 50);
  EXPECT_GT(total.refused, 20);
  EXPECT_GT(total.forks, 100);
  EXPECT_GT(total.truncates, 100);
  EXPECT_GT(total.evictions, 100);
}

}  // namespace
}  // namespace polykv
