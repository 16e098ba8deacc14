// attention_batch (backend/cpu/attention.h) over hand-built block tables, and the invariance rule:
// every query's output is bit-identical (memcmp) whether its sequence runs alone or batched with
// others that share 0, 1 or several prefix blocks (cascade: the shared tiles decoded once for all),
// whatever the chunking of its prefill and the thread count. For K/V pairs f16/f16, q8_0/turbo3t,
// q8_0/q8_0, turbo3/turbo3, q4_0/turbo2t, head_dim 64 and 128, GQA groups 1/2/4, sliding window on
// and off, decode (n_q = 1) and prefill chunks in one batch, every ISA's kernel set this CPU has.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/attention.h"
#include "core/error.h"
#include "kv/kv_cache.h"
#include "test_util.h"

namespace polykv {
namespace {

constexpr int kHeadKv = 2;

// Blocks of K or V rows ([n_head_kv][block_tokens] rows of one type, kv_cache.h's layout), each
// filled with the quantized rows of random vectors determined by (content seed, block index): two
// blocks made with the same seed and index hold the same bytes at different addresses.
class BlockStore {
 public:
  BlockStore(KvType kt, KvType vt, int hd, int bt) : kt_(kt), vt_(vt), hd_(hd), bt_(bt) {}
  const uint8_t* block(bool is_k, int b, uint32_t seed) {
    const KvType t = is_k ? kt_ : vt_;
    const size_t row_bytes = kv_head_bytes(t, hd_), rows = size_t(kHeadKv) * size_t(bt_);
    const auto x = test::random_floats(rows * size_t(hd_), seed * 7919u + uint32_t(b) * 2u + (is_k ? 1u : 0u));
    auto buf = std::make_unique<uint8_t[]>(rows * row_bytes);
    for (size_t r = 0; r < rows; ++r) kv_type_ops(t).quantize_head(x.data() + r * size_t(hd_), buf.get() + r * row_bytes, hd_);
    bufs_.push_back(std::move(buf));
    return bufs_.back().get();
  }
  KvLayerView view(const std::vector<const uint8_t*>& kb, const std::vector<const uint8_t*>& vb) const {
    KvLayerView v;
    v.k_type = kt_;
    v.v_type = vt_;
    v.block_tokens = bt_;
    v.n_head_kv = kHeadKv;
    v.head_dim = hd_;
    v.head_dim_v = hd_;
    v.k_blocks = kb.data();
    v.v_blocks = vb.data();
    v.k_head_bytes = kv_head_bytes(kt_, hd_);
    v.v_head_bytes = kv_head_bytes(vt_, hd_);
    return v;
  }
  int block_tokens() const { return bt_; }

 private:
  KvType kt_, vt_;
  int hd_, bt_;
  std::vector<std::unique_ptr<uint8_t[]>> bufs_;
};

// One sequence of the test batch: its block table and the queries of one step.
struct TestSeq {
  std::vector<const uint8_t*> kb, vb;
  int pos0 = 0, n_q = 0;
  std::vector<float> q;
};

// A batch shaped like many agents over one document: a shared prefix of 5 blocks for several
// sequences of different lengths, one sharing 1 block, one sharing none, a private copy of the
// prefix (same bytes, other pointers), a sequence inside the first (shared, partly foreign) block,
// and two with identical tables; decode tokens and prefill chunks mixed.
// Queries are left empty (set_queries).
std::vector<TestSeq> make_batch(BlockStore& store) {
  const int bt = store.block_tokens();
  const int shared_blocks = 320 / bt;
  std::vector<const uint8_t*> shared_k, shared_v;  // the document, content seed 1
  for (int b = 0; b < 1000 / bt + 1; ++b) {
    shared_k.push_back(store.block(true, b, 1));
    shared_v.push_back(store.block(false, b, 1));
  }
  struct Shape {
    int len, n_q, n_shared;  // n_shared: leading blocks taken from the shared document
    uint32_t seed;           // content of the other blocks (1: a private copy of the document)
  };
  const Shape shapes[] = {
      {700, 1, shared_blocks, 2},   // decode deep in its suffix
      {420, 40, shared_blocks, 3},  // prefill chunk right after the prefix
      {321, 1, shared_blocks, 4},   // first token after the prefix
      {600, 13, shared_blocks, 5},  // prefill chunk
      {500, 1, 1, 6},               // shares one block
      {333, 33, 0, 7},              // shares nothing
      {650, 1, 0, 1},               // a private copy of the document's blocks
      {37, 37, 1, 8},               // first prompt, inside the shared first block
      {700, 1, shared_blocks, 2},   // the same table as the first (another agent's same history)
  };
  std::vector<TestSeq> seqs;
  for (const Shape& s : shapes) {
    TestSeq t;
    const int n_blocks = (s.len + bt - 1) / bt;
    for (int b = 0; b < n_blocks; ++b) {
      if (b < s.n_shared) {
        t.kb.push_back(shared_k[size_t(b)]);
        t.vb.push_back(shared_v[size_t(b)]);
      } else if (&s == &shapes[8]) {  // the first sequence's own blocks
        t.kb.push_back(seqs[0].kb[size_t(b)]);
        t.vb.push_back(seqs[0].vb[size_t(b)]);
      } else {
        t.kb.push_back(store.block(true, b, s.seed));
        t.vb.push_back(store.block(false, b, s.seed));
      }
    }
    t.pos0 = s.len - s.n_q;
    t.n_q = s.n_q;
    seqs.push_back(std::move(t));
  }
  return seqs;
}

void set_queries(std::vector<TestSeq>& seqs, int n_head, int hd) {
  uint32_t seed = 100;
  for (TestSeq& s : seqs) s.q = test::random_floats(size_t(s.n_q) * size_t(n_head) * size_t(hd), seed++);
}

// Tables with the blocks that a window of w lets no query of the step see set to nullptr, as a
// sliding-window cache releases them.
std::vector<TestSeq> release_blocks(std::vector<TestSeq> seqs, int window, int bt) {
  if (window <= 0) return seqs;
  for (TestSeq& s : seqs) {
    const int first = std::max(0, s.pos0 - window + 1);
    for (int b = 0; b < first / bt; ++b) s.kb[size_t(b)] = s.vb[size_t(b)] = nullptr;
  }
  return seqs;
}

struct Config {
  KvType kt, vt;
  int hd, bt;
};

std::string describe(const Config& c, int group, int window, const char* isa) {
  return std::string(kv_type_name(c.kt)) + "/" + kv_type_name(c.vt) + " hd " + std::to_string(c.hd) + " bt " +
         std::to_string(c.bt) + " group " + std::to_string(group) + " window " + std::to_string(window) + " " + isa;
}

void check_batch_equals_alone(const Config& cfg) {
  BlockStore store(cfg.kt, cfg.vt, cfg.hd, cfg.bt);
  ThreadPool pool2(2), pool3(3);
  std::vector<TestSeq> base = make_batch(store);
  for (int group : {1, 2, 4}) {
    const int n_head = kHeadKv * group;
    set_queries(base, n_head, cfg.hd);
    for (int window : {0, 100}) {
      const std::vector<TestSeq> seqs = release_blocks(base, window, cfg.bt);
      AttentionParams p;
      p.n_head = n_head;
      p.scale = 1.0f / std::sqrt(float(cfg.hd));
      p.window = window;
      p.softcap = window ? 30.0f : 0.0f;
      for (const char* isa : {"best", "avx512", "avx2", "scalar"}) {
        AttentionKernels k = attention_kernels();
        if (std::string(isa) != "best" && !attention_kernels_for(isa, k)) continue;
        const std::string what = describe(cfg, group, window, isa);
        std::vector<AttentionSeq> batch;
        std::vector<std::vector<float>> out_batch(seqs.size()), out_alone(seqs.size());
        for (size_t i = 0; i < seqs.size(); ++i) {
          const TestSeq& s = seqs[i];
          const size_t n_out = size_t(s.n_q) * size_t(n_head) * size_t(cfg.hd);
          out_batch[i].assign(n_out, NAN);
          out_alone[i].assign(n_out, NAN);
          batch.push_back({store.view(s.kb, s.vb), s.pos0, s.n_q, s.q.data(), out_batch[i].data()});
          // Alone: attention() itself for the best kernels, else the one-sequence batch.
          if (std::string(isa) == "best") {
            attention(p, batch.back().kv, s.pos0, s.n_q, s.q.data(), out_alone[i].data(), pool2);
          } else {
            AttentionSeq one = batch.back();
            one.out = out_alone[i].data();
            attention_batch(p, std::span<const AttentionSeq>(&one, 1), pool2, k);
          }
        }
        attention_batch(p, batch, pool3, k);
        for (size_t i = 0; i < seqs.size(); ++i) {
          ASSERT_EQ(0, std::memcmp(out_batch[i].data(), out_alone[i].data(), out_batch[i].size() * sizeof(float)))
              << what << " sequence " << i;
          for (float x : out_batch[i]) ASSERT_TRUE(std::isfinite(x)) << what << " sequence " << i;
        }
        // Each kernel set against the scalar reference on the decode sequences (cheap ones).
        if (group == 2)
          for (size_t i = 0; i < seqs.size(); ++i) {
            if (seqs[i].n_q != 1) continue;
            std::vector<float> ref(out_batch[i].size());
            attention_ref(p, batch[i].kv, seqs[i].pos0, 1, seqs[i].q.data(), ref.data(),
                          attention_uses_q8_scores(k, cfg.kt, cfg.hd));
            double worst = 0, scale = 0;
            for (size_t j = 0; j < ref.size(); ++j) {
              worst = std::max(worst, double(std::abs(out_batch[i][j] - ref[j])));
              scale = std::max(scale, double(std::abs(ref[j])));
            }
            EXPECT_LE(worst, 1e-4 * scale) << what << " sequence " << i;
          }
      }
    }
  }
}

TEST(AttentionBatch, EqualsAloneF16) { check_batch_equals_alone({KvType::F16, KvType::F16, 64, 64}); }
TEST(AttentionBatch, EqualsAloneF16Hd128) { check_batch_equals_alone({KvType::F16, KvType::F16, 128, 64}); }
TEST(AttentionBatch, EqualsAloneQ8Turbo3t) { check_batch_equals_alone({KvType::Q8_0, KvType::Turbo3T, 64, 64}); }
TEST(AttentionBatch, EqualsAloneQ8Turbo3tHd128) { check_batch_equals_alone({KvType::Q8_0, KvType::Turbo3T, 128, 64}); }
TEST(AttentionBatch, EqualsAloneQ8Q8) { check_batch_equals_alone({KvType::Q8_0, KvType::Q8_0, 64, 64}); }
TEST(AttentionBatch, EqualsAloneQ8Q8Hd128) { check_batch_equals_alone({KvType::Q8_0, KvType::Q8_0, 128, 64}); }
TEST(AttentionBatch, EqualsAloneTurbo3) { check_batch_equals_alone({KvType::Turbo3, KvType::Turbo3, 64, 64}); }
TEST(AttentionBatch, EqualsAloneTurbo3Hd128) { check_batch_equals_alone({KvType::Turbo3, KvType::Turbo3, 128, 64}); }
TEST(AttentionBatch, EqualsAloneQ4Turbo2t) { check_batch_equals_alone({KvType::Q4_0, KvType::Turbo2T, 64, 64}); }
TEST(AttentionBatch, EqualsAloneQ4Turbo2tHd128) { check_batch_equals_alone({KvType::Q4_0, KvType::Turbo2T, 128, 64}); }
// Blocks of 16 tokens: a 32-key tile spans two blocks; blocks of 256: a chunk is one block.
TEST(AttentionBatch, EqualsAloneSmallBlocks) { check_batch_equals_alone({KvType::Q8_0, KvType::Turbo3T, 64, 16}); }
TEST(AttentionBatch, EqualsAloneLargeBlocks) { check_batch_equals_alone({KvType::F16, KvType::Q8_0, 128, 256}); }

// Rows of one prefill computed in one call, or in chunks of any sizes (the decode of one token
// included), with 1, 2 or 3 threads: every output row bit-identical. Uses a KvCache (the engine's
// one-sequence path), with a V precision window in one case.
TEST(AttentionBatch, ChunkingAndThreadsNeverChangeARow) {
  struct Case {
    KvType kt;
    const char* vt;  // name: "turbo3w" has a V precision window
    int hd, group, window;
  };
  const Case cases[] = {{KvType::Q8_0, "turbo3t", 64, 2, 0},  {KvType::Q8_0, "q8_0", 128, 4, 100},
                        {KvType::F16, "f16", 64, 1, 0},       {KvType::Turbo3, "turbo3w", 128, 2, 0},
                        {KvType::Q4_0, "turbo2t", 64, 4, 37}};
  constexpr int kLen = 700;
  const int splits[] = {0, 1, 9, 40, 41, 300, 333, 600, 699, kLen};  // chunk boundaries
  for (const Case& c : cases) {
    const int n_head = kHeadKv * c.group;
    KvCache kv = make_kv_cache(KvShape{1, kHeadKv, c.hd, c.hd, {}}, kv_type_name(c.kt), c.vt, kLen, 64);
    const auto k = test::random_floats(size_t(kLen) * kHeadKv * c.hd, 41);
    const auto v = test::random_floats(size_t(kLen) * kHeadKv * c.hd, 42);
    const auto q = test::random_floats(size_t(kLen) * n_head * c.hd, 43);
    kv.store(0, 0, kLen, k.data(), v.data());
    kv.commit(kLen);
    AttentionParams p;
    p.n_head = n_head;
    p.scale = 1.0f / std::sqrt(float(c.hd));
    p.window = c.window;
    const size_t row = size_t(n_head) * size_t(c.hd);
    ThreadPool pool1(1), pool2(2), pool3(3);
    std::vector<float> whole(size_t(kLen) * row), chunked(whole.size(), NAN), threads3(whole.size(), NAN);
    attention(p, kv.view(0), 0, kLen, q.data(), whole.data(), pool2);
    attention(p, kv.view(0), 0, kLen, q.data(), threads3.data(), pool3);
    for (size_t s = 0; s + 1 < std::size(splits); ++s) {
      const int a = splits[s], n = splits[s + 1] - a;
      attention(p, kv.view(0), a, n, q.data() + size_t(a) * row, chunked.data() + size_t(a) * row, pool1);
    }
    const std::string what = std::string(kv_type_name(c.kt)) + "/" + c.vt + " hd " + std::to_string(c.hd);
    for (int t = 0; t < kLen; ++t) {
      ASSERT_EQ(0, std::memcmp(whole.data() + size_t(t) * row, chunked.data() + size_t(t) * row, row * sizeof(float)))
          << what << " token " << t;
      ASSERT_EQ(0, std::memcmp(whole.data() + size_t(t) * row, threads3.data() + size_t(t) * row, row * sizeof(float)))
          << what << " token " << t;
    }
  }
}

TEST(AttentionBatch, RejectsMixedShapes) {
  BlockStore a(KvType::F16, KvType::F16, 64, 64), b(KvType::Q8_0, KvType::F16, 64, 64);
  std::vector<const uint8_t*> ka{a.block(true, 0, 1)}, va{a.block(false, 0, 1)};
  std::vector<const uint8_t*> kb{b.block(true, 0, 1)}, vb{b.block(false, 0, 1)};
  const auto q = test::random_floats(size_t(kHeadKv) * 64, 5);
  std::vector<float> o1(q.size()), o2(q.size());
  const AttentionSeq seqs[] = {{a.view(ka, va), 3, 1, q.data(), o1.data()}, {b.view(kb, vb), 3, 1, q.data(), o2.data()}};
  AttentionParams p;
  p.n_head = kHeadKv;
  ThreadPool pool(1);
  EXPECT_THROW(attention_batch(p, seqs, pool), Error);
}

}  // namespace
}  // namespace polykv
