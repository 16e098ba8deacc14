// MTP agents on one pool (issue #10, 2026-12-01g), with the shipped head
// (models/polykv-code-26m-mtp-head-q8_0.gguf):
//  - the head's rows over the pool are computed once per pool and copied into each agent's head KV
//    (MtpDrafter::fill / copy_prefix_from; into a drafter given all the pool's hidden states, or only
//    the last one as the engine does): the copied rows are the bytes an own catch-up computes, and
//    the drafts then equal an own catch-up's through several verify rounds; a copy is not steady drafting
//    (last_catch_up counts it, so the adaptive policy does not learn it as drafting cost);
//  - several sequences draft in one head pass per round (MtpDrafter::draft_many, MtpHead::forward_batch):
//    each gets the drafts and head KV bytes its own draft_many call gives;
//  - 8 agents on a pool drafting with MTP through the engine (fixed and adaptive policy) give the
//    tokens of plain greedy decoding, copy the pool's rows, and run far fewer head passes than drafts.
// The rounds feed the drafter the target's hidden states of a fixed greedy continuation X: the rows of
// accepted drafts are rows of X (the only ones a drafter keeps after accept()), so the protocol is the
// speculative loop's with "the target" accepting the drafts that match X.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "embedded_model_fixture.h"
#include "engine/engine.h"
#include "engine/spec/mtp_drafter.h"
#include "engine_test_util.h"
#include "kv/kv_cache.h"
#include "kv/owned_paged_kv.h"
#include "test_util.h"

namespace polykv {
namespace {

const std::string kHead = std::string(POLYKV_SOURCE_DIR) + "/models/polykv-code-26m-mtp-head-q8_0.gguf";

struct Fixture : test::EmbeddedModelFixture {
  std::shared_ptr<MtpHead> head = load_mtp_head(*model, kHead);
};

Fixture& fx() {
  static Fixture f;
  return f;
}

std::vector<int32_t> held_out(int n) { return fx().held_out(n); }

int E() { return fx().model->config().n_embd; }

// A sequence of the tests: X = context + greedy continuation, H = the target's hidden states of X's rows.
struct Text {
  std::vector<int32_t> x;
  std::vector<float> h;  // [len(x)][n_embd]
};

Text text(const std::vector<int32_t>& ctx, int n_more) {
  Text t{ctx, {}};
  const std::vector<int32_t> more = fx().plain_greedy(ctx, n_more);
  t.x.insert(t.x.end(), more.begin(), more.end());
  KvCache kv(fx().model->kv_shape(), KvType::F16, KvType::F16, 2048);
  t.h.resize(t.x.size() * size_t(E()));
  const Model::BatchSeq s{t.x, &kv, nullptr, false, t.h.data()};
  fx().model->forward_batch(std::span(&s, 1));
  return t;
}

std::span<const int32_t> first(const Text& t, int c) { return std::span(t.x).first(size_t(c)); }

// After drafts d from context X[0, c): the verify rows at c - 1 .. c - 1 + k (X's hidden states), then
// accept the drafts that match X plus X's next token. Returns the new context length.
int verify(MtpDrafter& d, const Text& t, int c, const std::vector<int32_t>& drafts) {
  int n_acc = 0;
  while (n_acc < int(drafts.size()) && c + n_acc < int(t.x.size()) && drafts[size_t(n_acc)] == t.x[size_t(c + n_acc)])
    ++n_acc;
  const int rows = std::min(int(drafts.size()) + 1, int(t.x.size()) - (c - 1));
  d.target_hidden(t.h.data() + size_t(c - 1) * size_t(E()), rows, c - 1);
  const int c2 = c + n_acc + 1;
  d.accept(first(t, c2), n_acc);
  return c2;
}

// The head KV bytes of positions [0, n) of a and b are equal.
void expect_same_kv(const KvSequence& a, const KvSequence& b, int n) {
  const KvLayerView va = a.view(0), vb = b.view(0);
  for (int p = 0; p < n; ++p)
    for (int g = 0; g < va.n_head_kv; ++g) {
      ASSERT_EQ(std::memcmp(va.k_row(p, g), vb.k_row(p, g), va.k_head_bytes), 0) << "K row " << p << " head " << g;
      ASSERT_EQ(std::memcmp(va.v_row(p, g), vb.v_row(p, g), va.v_head_bytes), 0) << "V row " << p << " head " << g;
    }
}
void expect_same_kv(const MtpDrafter& a, const MtpDrafter& b, int n) { expect_same_kv(a.kv(), b.kv(), n); }

TEST(SpecPoolMtp, ACopiedPoolHeadKvDraftsAsAnOwnCatchUp) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  const std::vector<int32_t> pool = held_out(600);  // fill() runs 599 rows: 3 chunks of up to 256
  const int P = int(pool.size());
  MtpDrafter shared(fx().head, P);
  const Text tp = text(pool, 0);
  shared.target_hidden(tp.h.data(), P, 0);
  shared.fill(pool);
  ASSERT_EQ(shared.kv().n_tokens(), P - 1);  // row P - 1 needs the token after the pool
  for (const char* suffix : {"\n\ndef parse_config(path):\n    ", "\n\nclass Cache:\n    def __init__(self"}) {
    SCOPED_TRACE(suffix);
    std::vector<int32_t> ctx = pool;
    const std::vector<int32_t> s = fx().encode(suffix, false);
    ctx.insert(ctx.end(), s.begin(), s.end());
    const Text t = text(ctx, 48);
    const int L = int(ctx.size());
    // As the engine: the pool's rows at admission, the suffix's after the agent's prefill step, then
    // the first token (context L + 1) and prefill() (rows up to L - 2 wait for the first draft).
    // `tail` is given only the pool's last row (the engine's way: the copy fills the gap before it).
    MtpDrafter own(fx().head, 1024), copied(fx().head, 1024), tail(fx().head, 1024);
    for (MtpDrafter* d : {&own, &copied}) d->target_hidden(tp.h.data(), P, 0);
    tail.target_hidden(tp.h.data() + size_t(P - 1) * size_t(E()), 1, P - 1);
    for (MtpDrafter* d : {&own, &copied, &tail}) d->target_hidden(t.h.data() + size_t(P) * size_t(E()), L - P, P);
    int c = L + 1;
    EXPECT_FALSE(own.kv().n_tokens() > 0);
    for (MtpDrafter* d : {&copied, &tail}) {
      EXPECT_TRUE(d->wants_prefix());
      EXPECT_EQ(d->copy_prefix_from(shared, first(t, c)), P - 1);
      EXPECT_EQ(d->kv().n_tokens(), P - 1);
      EXPECT_FALSE(d->wants_prefix());
      EXPECT_EQ(d->copy_prefix_from(shared, first(t, c)), 0);  // nothing left to copy
    }
    own.prefill(first(t, c));
    copied.prefill(first(t, c));
    tail.prefill(first(t, c));
    ASSERT_EQ(own.kv().n_tokens(), c - 3 + 1);
    ASSERT_EQ(copied.kv().n_tokens(), own.kv().n_tokens());
    ASSERT_EQ(tail.kv().n_tokens(), own.kv().n_tokens());
    expect_same_kv(own, copied, own.kv().n_tokens());
    expect_same_kv(own, tail, own.kv().n_tokens());
    int accepted = 0;
    for (int round = 0; round < 6; ++round) {
      SCOPED_TRACE(round);
      std::vector<int32_t> a, b, e;
      own.draft(first(t, c), 4, a, nullptr);
      copied.draft(first(t, c), 4, b, nullptr);
      tail.draft(first(t, c), 4, e, nullptr);
      ASSERT_EQ(a, b);
      ASSERT_EQ(a, e);
      ASSERT_EQ(a.size(), 4u);
      // The first draft counts the copied rows as caught up (not steady drafting); then as the own one.
      for (const MtpDrafter* d : {&copied, &tail}) {
        if (round == 0) EXPECT_EQ(d->last_catch_up(), P - 1 + own.last_catch_up());
        else EXPECT_EQ(d->last_catch_up(), own.last_catch_up());
      }
      if (round == 1) EXPECT_LE(copied.last_catch_up(), Drafter::kSteadyCatchUp);
      const int c_own = verify(own, t, c, a);
      ASSERT_EQ(verify(copied, t, c, b), c_own);
      ASSERT_EQ(verify(tail, t, c, e), c_own);
      accepted += c_own - c - 1;
      c = c_own;
    }
    EXPECT_GT(accepted, 0) << "the head drafted nothing the target keeps";
    expect_same_kv(own, copied, own.kv().n_tokens());
    expect_same_kv(own, tail, own.kv().n_tokens());
  }
  // A context that leaves the pool early copies only the rows whose next token is still the pool's.
  std::vector<int32_t> other(pool.begin(), pool.begin() + 300);
  other.push_back((pool[300] + 1) % fx().model->config().n_vocab);
  MtpDrafter part(fx().head, 1024);
  part.target_hidden(tp.h.data(), 300, 0);  // (any hidden states: only the count is checked)
  EXPECT_EQ(part.copy_prefix_from(shared, other), 299);
  // A gap the source cannot fill (rows before position 300 wanted, 299 valid) stays: no copy, no drafts.
  MtpDrafter gap(fx().head, 1024);
  gap.target_hidden(tp.h.data() + size_t(300) * size_t(E()), 1, 300);
  EXPECT_EQ(gap.copy_prefix_from(shared, other), 0);
  other.push_back(other.back());
  std::vector<int32_t> none;
  gap.draft(other, 3, none, nullptr);
  EXPECT_TRUE(none.empty());
}

TEST(SpecPoolMtp, BatchedHeadEqualsEachSequenceAlone) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  const std::vector<int32_t> pool = held_out(300);
  const char* suffixes[] = {"\n\ndef merge(a, b):\n    ", "\n\nclass Stack:\n    def push(self, x):\n        self.",
                            "\n\n# checksum\ndef crc(data):\n    ", "\n\nx = "};
  const int n = int(std::size(suffixes));
  std::vector<Text> ts;
  std::vector<int> cs;
  std::vector<std::unique_ptr<MtpDrafter>> alone, together;
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t> ctx = pool;
    const std::vector<int32_t> s = fx().encode(suffixes[i], false);
    ctx.insert(ctx.end(), s.begin(), s.end());
    ts.push_back(text(ctx, 40));
    const int L = int(ctx.size());
    cs.push_back(L + 1);
    alone.push_back(std::make_unique<MtpDrafter>(fx().head, 1024));
    together.push_back(std::make_unique<MtpDrafter>(fx().head, 1024));
    for (MtpDrafter* d : {alone.back().get(), together.back().get()}) {
      if (i == 3) continue;  // sequence 3: no hidden states (a gap): no drafts either way
      d->target_hidden(ts.back().h.data(), L, 0);
      // Sequence 0 catches up all its rows in its first draft (2 chunks beside the others' short ones).
      if (i != 0) d->prefill(first(ts.back(), L + 1));
    }
  }
  int passes_together = 0, passes_alone = 0;
  for (int round = 0; round < 5; ++round) {
    SCOPED_TRACE(round);
    std::vector<std::vector<int32_t>> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
    std::vector<MtpJob> jobs;
    for (int i = 0; i < n; ++i) {
      const int k = 1 + (i + round) % 4;
      const MtpJob one{alone[size_t(i)].get(), first(ts[size_t(i)], cs[size_t(i)]), k, &a[size_t(i)]};
      passes_alone += MtpDrafter::draft_many(std::span(&one, 1));
      jobs.push_back({together[size_t(i)].get(), first(ts[size_t(i)], cs[size_t(i)]), k, &b[size_t(i)]});
    }
    passes_together += MtpDrafter::draft_many(jobs);
    for (int i = 0; i < n; ++i) {
      SCOPED_TRACE(i);
      ASSERT_EQ(a[size_t(i)], b[size_t(i)]);
      EXPECT_EQ(a[size_t(i)].size(), i == 3 ? 0u : size_t(1 + (i + round) % 4));
      EXPECT_EQ(alone[size_t(i)]->last_catch_up(), together[size_t(i)]->last_catch_up());
      ASSERT_EQ(alone[size_t(i)]->kv().n_tokens(), together[size_t(i)]->kv().n_tokens());
      expect_same_kv(*alone[size_t(i)], *together[size_t(i)], alone[size_t(i)]->kv().n_tokens());
      if (i == 3) continue;
      const int c = verify(*alone[size_t(i)], ts[size_t(i)], cs[size_t(i)], a[size_t(i)]);
      ASSERT_EQ(verify(*together[size_t(i)], ts[size_t(i)], cs[size_t(i)], b[size_t(i)]), c);
      cs[size_t(i)] = c;
    }
  }
  EXPECT_LT(passes_together, passes_alone);
  // The drafters must share one head; a drafter must not appear twice.
  auto other_head = load_mtp_head(*fx().model, kHead);
  MtpDrafter x(other_head, 64);
  std::vector<int32_t> o1, o2;
  const MtpJob bad[] = {{together[0].get(), first(ts[0], cs[0]), 1, &o1}, {&x, first(ts[0], cs[0]), 1, &o2}};
  EXPECT_THROW(MtpDrafter::draft_many(bad), Error);
  const MtpJob twice[] = {{together[1].get(), first(ts[1], cs[1]), 1, &o1}, {together[1].get(), first(ts[1], cs[1]), 1, &o2}};
  EXPECT_THROW(MtpDrafter::draft_many(twice), Error);
}

// MtpHead::forward_batch grouped by KV pool (the path of a backend with one pool per step, CUDA: each
// drafter's head KV is a pool of its own), forced here on the CPU: the same logits, hidden rows and KV
// bytes as one pass over every sequence.
TEST(SpecPoolMtp, HeadPassesGroupedByPoolEqualOnePass) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  const Text t = text(held_out(120), 8);
  MtpHead& head = *fx().head;
  const int n = 3, V = fx().model->config().n_vocab;
  std::vector<std::unique_ptr<OwnedPagedKv>> kv_one, kv_grouped;
  std::vector<std::vector<float>> lg_one(n, std::vector<float>(size_t(V))), lg_grouped = lg_one;
  std::vector<std::vector<float>> h_one(n, std::vector<float>(size_t(E()))), h_grouped = h_one;
  std::vector<MtpHead::Seq> one, grouped;
  for (int i = 0; i < n; ++i) {
    const int rows = 20 + 37 * i;  // 20, 57, 94 rows: different lengths in one pass
    for (auto* kvs : {&kv_one, &kv_grouped})
      kvs->push_back(std::make_unique<OwnedPagedKv>(head.kv_shape(), KvType::F16, KvType::F16, 256, 256,
                                                    fx().model->backend().kv_memory()));
    const std::span<const int32_t> next = std::span(t.x).subspan(1, size_t(rows));
    one.push_back({next, t.h.data(), kv_one.back().get(), lg_one[size_t(i)].data(), h_one[size_t(i)].data()});
    grouped.push_back({next, t.h.data(), kv_grouped.back().get(), lg_grouped[size_t(i)].data(),
                       h_grouped[size_t(i)].data()});
  }
  head.forward_batch(one, /*split_by_pool=*/false);
  head.forward_batch(grouped, /*split_by_pool=*/true);
  for (int i = 0; i < n; ++i) {
    SCOPED_TRACE(i);
    ASSERT_EQ(std::memcmp(lg_one[size_t(i)].data(), lg_grouped[size_t(i)].data(), size_t(V) * sizeof(float)), 0);
    ASSERT_EQ(std::memcmp(h_one[size_t(i)].data(), h_grouped[size_t(i)].data(), size_t(E()) * sizeof(float)), 0);
    const int rows = 20 + 37 * i;
    ASSERT_EQ(kv_one[size_t(i)]->n_tokens(), rows);
    ASSERT_EQ(kv_grouped[size_t(i)]->n_tokens(), rows);
    expect_same_kv(*kv_one[size_t(i)], *kv_grouped[size_t(i)], rows);
  }
}

TEST(SpecPoolMtp, EightAgentsOnAPoolAreLosslessAndShareThePoolsRows) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  const std::vector<int32_t> doc = held_out(600);
  for (const char* policy : {"fixed", "adaptive"}) {
    SCOPED_TRACE(policy);
    EngineOptions o;
    o.parallel = 8;
    o.kv_tokens = 16384;
    o.block_tokens = 32;
    o.step_tokens = 256;  // the pool takes 3 chunks
    o.model_id = "embedded";
    o.check_invariants = true;
    o.spec.mtp_path = kHead;
    Engine engine(*fx().model, fx().eog(), o);
    engine.create_pool("doc", doc, "", "");
    const int n_agents = 8, n_gen = 24;
    std::vector<std::unique_ptr<test::Collector>> cs;
    std::vector<std::vector<int32_t>> full;
    for (int a = 0; a < n_agents; ++a) {
      const auto prompt = fx().encode("\n\n# Agent " + std::to_string(a) + "\ndef helper_" + std::to_string(a) + "(", false);
      cs.push_back(std::make_unique<test::Collector>());
      GenerationRequest r = cs.back()->request(prompt, n_gen, "doc", /*ignore_eos=*/true);
      r.spec = "mtp";
      r.spec_n_max = 3;
      r.spec_policy = policy;
      engine.submit(std::move(r));
      std::vector<int32_t> f = doc;
      f.insert(f.end(), prompt.begin(), prompt.end());
      full.push_back(std::move(f));
    }
    for (auto& c : cs) c->wait();
    for (int a = 0; a < n_agents; ++a) {
      SCOPED_TRACE(a);
      EXPECT_EQ(cs[size_t(a)]->info.reason, FinishReason::Length) << cs[size_t(a)]->info.error;
      EXPECT_EQ(cs[size_t(a)]->ids, fx().plain_greedy(full[size_t(a)], n_gen));
    }
    const ServiceMetrics m = engine.metrics();
    // Every agent's head that drafted got the pool's rows by copy: all but the last (it needs the agent's
    // first token). The copy comes with the first draft (2026-12-02), so with the adaptive policy an agent
    // whose batch never lets it draft copies nothing; with fixed n-max every agent drafts.
    const int64_t per_agent = int64_t(doc.size() - 1);
    if (std::string(policy) == "fixed") EXPECT_EQ(m.spec_mtp_shared_rows_total, int64_t(n_agents) * per_agent);
    EXPECT_EQ(m.spec_mtp_shared_rows_total % per_agent, 0);
    EXPECT_LE(m.spec_mtp_shared_rows_total, int64_t(n_agents) * per_agent);
    if (std::string(policy) == "fixed") {
      // n-max 3, all agents stepping together: about 3 head passes per step for 24 drafts.
      EXPECT_GE(m.spec_drafted_tokens_total, n_agents * 3);
      EXPECT_LT(2 * m.spec_mtp_passes_total, m.spec_drafted_tokens_total)
          << m.spec_mtp_passes_total << " head passes for " << m.spec_drafted_tokens_total << " drafts";
      EXPECT_GT(m.spec_accepted_tokens_total, 0);
    }
    // A later agent copies from the same shared head KV.
    test::Collector c;
    GenerationRequest r = c.request(fx().encode("\n\ndef size(self):\n    return ", false), 8, "doc", true);
    r.spec = "mtp";
    r.spec_policy = policy;
    engine.submit(std::move(r));
    c.wait();
    // With the adaptive policy the lone agent drafts only if the measured step costs say a draft pays (wall
    // clock: a loaded machine may say no, 1 run in 10 on the 2-core VM of 2026-12-04), and copies only then.
    const int64_t after = engine.metrics().spec_mtp_shared_rows_total;
    if (std::string(policy) == "fixed")
      EXPECT_EQ(after, m.spec_mtp_shared_rows_total + per_agent);
    else
      EXPECT_TRUE(after == m.spec_mtp_shared_rows_total || after == m.spec_mtp_shared_rows_total + per_agent) << after;
  }
}

// 2026-12-02: 8 MTP agents in a batch where no draft can pay (the cost model T(R) = R: with 2+ decoding
// sequences even accepted drafts cost a row each for a token each) never draft, so they neither copy the
// pool's head rows nor run the head; their output is plain decoding's. Before, every agent copied the
// pool's 599 rows at its first token and probed after 8 steps.
TEST(SpecPoolMtp, CostBoundAgentsCopyNothingAndRunNoHead) {
  POLYKV_REQUIRE_FIXTURES_OR_SKIP();
  const std::vector<int32_t> doc = held_out(600);
  EngineOptions o;
  o.parallel = 8;
  o.kv_tokens = 16384;
  o.block_tokens = 32;
  o.step_tokens = 256;
  o.model_id = "embedded";
  o.check_invariants = true;
  o.spec.mtp_path = kHead;
  o.spec_cost_fixed = 0;
  o.spec_cost_per_row = 1;
  Engine engine(*fx().model, fx().eog(), o);
  engine.create_pool("doc", doc, "", "");
  const int n_agents = 8, n_gen = 24;
  std::vector<std::unique_ptr<test::Collector>> cs;
  std::vector<std::vector<int32_t>> full;
  for (int a = 0; a < n_agents; ++a) {
    // One-token prompts: every step is decode-only (a prompt chunk makes a step's tokens dear).
    const std::vector<int32_t> prompt{fx().encode(" x" + std::to_string(a), false).at(0)};
    cs.push_back(std::make_unique<test::Collector>());
    GenerationRequest r = cs.back()->request(prompt, n_gen, "doc", /*ignore_eos=*/true);
    r.spec = "mtp";
    r.spec_n_max = 3;
    engine.submit(std::move(r));
    std::vector<int32_t> f = doc;
    f.insert(f.end(), prompt.begin(), prompt.end());
    full.push_back(std::move(f));
  }
  for (auto& c : cs) c->wait();
  for (int a = 0; a < n_agents; ++a) {
    SCOPED_TRACE(a);
    EXPECT_EQ(cs[size_t(a)]->ids, fx().plain_greedy(full[size_t(a)], n_gen));
  }
  const ServiceMetrics m = engine.metrics();
  EXPECT_EQ(m.spec_drafted_tokens_total, 0);
  EXPECT_EQ(m.spec_mtp_shared_rows_total, 0);
  EXPECT_EQ(m.spec_mtp_passes_total, 0);
}

}  // namespace
}  // namespace polykv
