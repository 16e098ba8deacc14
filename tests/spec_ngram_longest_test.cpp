// NgramDrafter as a longest-match lookup (2026-12-01f: per-token follower lists, a bounded scan): with
// a long cap (32) the earlier occurrence whose match with the context's end is longest wins over newer,
// shorter ones; against a linear scan on long random contexts with repeats (a small alphabet and
// copied stretches), for the cap 32 and the default 1..3.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "engine/spec/ngram_drafter.h"

namespace polykv {
namespace {

std::vector<int32_t> drafts_of(NgramDrafter& d, const std::vector<int32_t>& ctx, int max_n) {
  std::vector<int32_t> out;
  d.draft(ctx, max_n, out, nullptr);
  return out;
}

// Linear scan: for n = n_max..1, the latest start s < L - n with ctx[s, s+n) == the last n tokens.
std::vector<int32_t> reference(const std::vector<int32_t>& ctx, int n_max, int max_n) {
  const int L = int(ctx.size());
  for (int n = std::min(n_max, L - 1); n >= 1; --n)
    for (int s = L - n - 1; s >= 0; --s) {
      if (!std::equal(ctx.begin() + s, ctx.begin() + s + n, ctx.end() - n)) continue;
      std::vector<int32_t> out;
      for (int i = s + n; i < L && int(out.size()) < max_n; ++i) out.push_back(ctx[size_t(i)]);
      return out;
    }
  return {};
}

TEST(SpecNgramLongest, LongestMatchBeatsNewerShorterOnes) {
  NgramDrafter d(1, 32);
  // "1 2 3 4 5 -> 6" (a 5-token match) is older than "3 4 5 -> 9" (3 tokens, newer): 6 wins. With
  // the default range 1..3 both match 3 tokens and the newer 9 wins.
  const std::vector<int32_t> ctx{1, 2, 3, 4, 5, 6, 0, 3, 4, 5, 9, 0, 1, 2, 3, 4, 5};
  EXPECT_EQ(drafts_of(d, ctx, 1), (std::vector<int32_t>{6}));
  NgramDrafter old;
  EXPECT_EQ(drafts_of(old, ctx, 1), (std::vector<int32_t>{9}));
}

TEST(SpecNgramLongest, MatchesTheLinearScanOnLongContexts) {
  for (int cap : {32, NgramDrafter::kDefaultNMax}) {
    std::mt19937 g(11);
    NgramDrafter d(1, cap);
    std::vector<int32_t> ctx;
    for (int step = 0; step < 1500; ++step) {
      if (g() % 8 == 0 && ctx.size() > 40) {  // copy an earlier stretch: long matches
        const size_t from = g() % (ctx.size() - 40), n = 5 + g() % 35;
        for (size_t i = 0; i < n; ++i) ctx.push_back(ctx[from + i]);
      } else {
        ctx.push_back(int32_t(g() % 5));
      }
      const int max_n = 1 + int(g() % 6);
      ASSERT_EQ(drafts_of(d, ctx, max_n), reference(ctx, cap, max_n)) << "cap " << cap << " length " << ctx.size();
    }
  }
}

}  // namespace
}  // namespace polykv
