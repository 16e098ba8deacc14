// HybridDrafter (engine/spec/hybrid_drafter.h, `--spec ngram+mtp` / `ngram+draft`): n-gram drafts where
// the context's end matches an earlier stretch of at least min_match tokens, the model drafter's
// (at most model_n_max) elsewhere; both see every accept() and the target's hidden states; the source it
// announces (next_source) is the one draft() uses, and the adaptive policy keeps one acceptance
// estimate per source (SpecSeqState::of). A fake model drafter records what it is given.
#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "engine/spec/hybrid_drafter.h"
#include "engine/spec/make_drafter.h"
#include "engine/spec/spec_policy.h"

namespace polykv {
namespace {

struct FakeModelDrafter final : Drafter {
  int drafts = 0, accepts = 0, prefills = 0, hidden_rows = 0, last_max_n = 0;
  std::string name() const override { return "fake"; }
  void draft(std::span<const int32_t> context, int max_n, std::vector<int32_t>& out, DraftProbs*) override {
    ++drafts;
    last_max_n = max_n;
    for (int i = 0; i < max_n; ++i) out.push_back(1000 + int32_t(context.size()) + i);
  }
  void prefill(std::span<const int32_t>) override { ++prefills; }
  void accept(std::span<const int32_t>, int) override { ++accepts; }
  bool needs_target_hidden() const override { return true; }
  void target_hidden(const float*, int n_rows, int) override { hidden_rows += n_rows; }
  int last_catch_up() const override { return 7; }
};

struct Hybrid {
  FakeModelDrafter* fake;
  std::unique_ptr<HybridDrafter> d;
  explicit Hybrid(int model_n_max = 3, int min_match = 2) {
    auto f = std::make_unique<FakeModelDrafter>();
    fake = f.get();
    d = std::make_unique<HybridDrafter>(std::move(f), model_n_max, min_match);
  }
  std::vector<int32_t> draft(const std::vector<int32_t>& ctx, int max_n) {
    std::vector<int32_t> out;  // cleared by the caller (drafter.h)
    d->draft(ctx, max_n, out, nullptr);
    return out;
  }
};

TEST(SpecHybrid, NgramWhereTheContextRepeatsTheModelElsewhere) {
  Hybrid h;
  EXPECT_EQ(h.d->name(), "ngram+fake");
  EXPECT_EQ(h.d->source_name(0), "ngram");
  EXPECT_EQ(h.d->source_name(1), "fake");
  // "5 6 7" occurred before, followed by 8 9 2: a 3-token match, n-gram drafts (up to max_n, not capped at 3).
  const std::vector<int32_t> rep{1, 5, 6, 7, 8, 9, 2, 5, 6, 7};
  EXPECT_EQ(h.d->next_source(rep), 0);
  EXPECT_EQ(h.draft(rep, 8), (std::vector<int32_t>{8, 9, 2, 5, 6, 7}));
  EXPECT_FALSE(h.d->model_drafted());
  EXPECT_EQ(h.fake->drafts, 0);
  EXPECT_EQ(h.d->last_catch_up(), 0);  // an n-gram draft feeds nothing
  // Nothing repeats: the model drafts, at most model_n_max.
  const std::vector<int32_t> fresh{1, 2, 3, 4};
  EXPECT_EQ(h.d->next_source(fresh), 1);
  EXPECT_EQ(h.draft(fresh, 8), (std::vector<int32_t>{1004, 1005, 1006}));
  EXPECT_TRUE(h.d->model_drafted());
  EXPECT_EQ(h.fake->last_max_n, 3);
  EXPECT_EQ(h.d->last_catch_up(), 7);  // the model drafter's
  EXPECT_EQ(h.draft(fresh, 2).size(), 2u);  // and at most max_n
  // A one-token match (4 seen before, followed by 9) is below min_match 2: the model drafts.
  const std::vector<int32_t> short_match{4, 9, 1, 4};
  EXPECT_EQ(h.d->next_source(short_match), 1);
  EXPECT_EQ(h.draft(short_match, 4), (std::vector<int32_t>{1004, 1005, 1006}));
  // With min_match 1 that match is enough.
  Hybrid one(3, 1);
  EXPECT_EQ(one.d->next_source(short_match), 0);
  EXPECT_EQ(one.draft(short_match, 4), (std::vector<int32_t>{9, 1, 4}));
  EXPECT_EQ(h.d->ngram_drafts(), 1);
  EXPECT_EQ(h.d->model_drafts(), 3);
  // max_n 0: nothing, from neither.
  const int before = h.fake->drafts;
  EXPECT_TRUE(h.draft(fresh, 0).empty());
  EXPECT_EQ(h.fake->drafts, before);
}

TEST(SpecHybrid, TheModelDrafterSeesEveryStep) {
  Hybrid h;
  const std::vector<int32_t> ctx{1, 5, 6, 7, 8, 9, 2, 5, 6, 7};
  h.d->prefill(ctx);
  EXPECT_EQ(h.fake->prefills, 1);
  EXPECT_TRUE(h.d->needs_target_hidden());
  std::vector<float> hid(4 * 16);
  h.d->target_hidden(hid.data(), 4, 10);
  EXPECT_EQ(h.fake->hidden_rows, 4);
  (void)h.draft(ctx, 4);  // n-gram
  h.d->accept(ctx, 2);
  (void)h.draft({1, 2, 3}, 4);  // model
  h.d->accept(ctx, 0);
  EXPECT_EQ(h.fake->accepts, 2);
}

// On random contexts (small vocabularies: many matches of every length), the announced source is the one
// that drafts, and n-gram drafts are exactly NgramDrafter's whenever its match reaches min_match.
TEST(SpecHybrid, AnnouncedSourceIsTheOneThatDrafts) {
  std::mt19937 rng(7);
  for (int min_match : {1, 2, 3}) {
    Hybrid h(3, min_match);
    std::vector<int32_t> ctx;
    int model_steps = 0, ngram_steps = 0;
    for (int step = 0; step < 400; ++step) {
      ctx.push_back(int32_t(rng() % 6));
      const int src = h.d->next_source(ctx);
      NgramDrafter ref(1, NgramDrafter::kDefaultNMax);
      std::vector<int32_t> want;
      ref.draft(ctx, 5, want, nullptr);
      const std::vector<int32_t> got = h.draft(ctx, 5);
      ASSERT_EQ(src, h.d->model_drafted() ? 1 : 0) << "step " << step;
      if (src == 0) {
        ++ngram_steps;
        EXPECT_GE(ref.last_match(), min_match);
        EXPECT_EQ(got, want) << "step " << step;
      } else {
        ++model_steps;
        EXPECT_TRUE(want.empty() || ref.last_match() < min_match) << "step " << step;
        EXPECT_EQ(got.size(), 3u);
      }
    }
    EXPECT_GT(ngram_steps, 0);
    EXPECT_GT(model_steps, 0);
  }
}

TEST(SpecHybrid, AcceptanceIsKeptPerSource) {
  SpecSeqState s;
  for (int i = 0; i < 20; ++i) s.after_step(3, 0, /*source=*/1);  // the model's drafts all rejected
  EXPECT_LT(s.of(1).rate, 0.1);
  EXPECT_DOUBLE_EQ(s.of(0).rate, AcceptanceEma::kPrior);  // the n-gram estimate untouched
  for (int i = 0; i < 20; ++i) s.after_step(4, 4, /*source=*/0);
  EXPECT_GT(s.of(0).rate, 0.9);
  EXPECT_LT(s.of(1).rate, 0.1);
  EXPECT_EQ(&s.of(0), &s.acceptance);  // source 0 is a one-source drafter's estimate
}

TEST(SpecHybrid, KindsAndDefaults) {
  for (const char* k : {"", "none", "ngram", "draft", "mtp", "ngram+draft", "ngram+mtp"}) EXPECT_TRUE(valid_spec_kind(k)) << k;
  for (const char* k : {"ngram+", "ngram+ngram", "mtp+ngram", "draft+mtp", "NGRAM", " ngram"})
    EXPECT_FALSE(valid_spec_kind(k)) << k;
  EXPECT_EQ(spec_model_kind("ngram+mtp"), "mtp");
  EXPECT_EQ(spec_model_kind("ngram+draft"), "draft");
  EXPECT_EQ(spec_model_kind("ngram"), "");
  EXPECT_EQ(default_spec_n_max("ngram+mtp"), kDefaultNgramNMax);
  EXPECT_EQ(default_spec_n_max("mtp"), kDefaultSpecNMax);
  SpecOptions o;
  o.kind = "ngram+draft";
  EXPECT_THROW(validate_spec(o, /*have_draft_model=*/false), Error);
  EXPECT_NO_THROW(validate_spec(o, true));
}

}  // namespace
}  // namespace polykv
