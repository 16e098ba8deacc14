// NgramDrafter (engine/spec/ngram_drafter.h): prompt lookup against a brute-force reference, the
// longest n-gram first, the most recent occurrence, incremental growth and rebuilds.
#include <gtest/gtest.h>

#include <random>

#include "engine/spec/ngram_drafter.h"

namespace polykv {
namespace {

std::vector<int32_t> drafts_of(NgramDrafter& d, const std::vector<int32_t>& ctx, int max_n) {
  std::vector<int32_t> out;
  d.draft(ctx, max_n, out, nullptr);
  return out;
}

// The specification, by a linear scan: for n = n_max..n_min, the latest start s < L - n with
// ctx[s, s+n) == the last n tokens; the tokens from s + n on (up to max_n, within the context).
std::vector<int32_t> reference(const std::vector<int32_t>& ctx, int n_min, int n_max, int max_n) {
  const int L = int(ctx.size());
  for (int n = std::min(n_max, L - 1); n >= n_min; --n) {
    for (int s = L - n - 1; s >= 0; --s) {
      if (!std::equal(ctx.begin() + s, ctx.begin() + s + n, ctx.end() - n)) continue;
      std::vector<int32_t> out;
      for (int i = s + n; i < L && int(out.size()) < max_n; ++i) out.push_back(ctx[size_t(i)]);
      return out;
    }
  }
  return {};
}

TEST(SpecNgram, CopiesWhatFollowedTheLongestRecentMatch) {
  NgramDrafter d(1, 3);
  // "... 5 6 7 8 9 ... 5 6 7": the 3-gram 5 6 7 occurred before, followed by 8 9.
  EXPECT_EQ(drafts_of(d, {1, 5, 6, 7, 8, 9, 2, 5, 6, 7}, 2), (std::vector<int32_t>{8, 9}));
  NgramDrafter d2(1, 3);
  // The most recent occurrence wins: 4 followed by 1 first, later by 2.
  EXPECT_EQ(drafts_of(d2, {4, 1, 0, 4, 2, 0, 4}, 1), (std::vector<int32_t>{2}));
  NgramDrafter d3(1, 3);
  // Longer matches beat more recent shorter ones: "3 4" -> 5 (a 2-gram) over "4" -> 9 (later, 1-gram).
  EXPECT_EQ(drafts_of(d3, {3, 4, 5, 0, 4, 9, 3, 4}, 1), (std::vector<int32_t>{5}));
  NgramDrafter d4(2, 3);
  // n_min 2: a lone repeated token is not enough.
  EXPECT_TRUE(drafts_of(d4, {4, 1, 0, 4}, 3).empty());
  NgramDrafter d5;
  EXPECT_TRUE(drafts_of(d5, {7}, 3).empty());
  EXPECT_TRUE(drafts_of(d5, {1, 2, 3}, 3).empty());  // nothing repeats
}

TEST(SpecNgram, MatchesTheLinearScanAsTheContextGrows) {
  std::mt19937 g(5);
  for (int n_min : {1, 2}) {
    for (int n_max : {2, 4}) {
      NgramDrafter d(n_min, n_max);
      std::vector<int32_t> ctx;
      for (int step = 0; step < 600; ++step) {
        ctx.push_back(int32_t(g() % 7));  // a small alphabet: many matches
        const int max_n = 1 + int(g() % 5);
        ASSERT_EQ(drafts_of(d, ctx, max_n), reference(ctx, n_min, n_max, max_n))
            << "n " << n_min << ".." << n_max << " length " << ctx.size();
      }
    }
  }
}

TEST(SpecNgram, RebuildsForAContextThatIsNotAnExtension) {
  NgramDrafter d(1, 3);
  EXPECT_EQ(drafts_of(d, {1, 2, 3, 1, 2}, 2), (std::vector<int32_t>{3, 1}));
  // A different, shorter sequence: the old index must not leak into it.
  EXPECT_TRUE(drafts_of(d, {9, 8, 1, 2}, 2).empty());
  EXPECT_EQ(drafts_of(d, {9, 8, 1, 2, 9, 8}, 2), (std::vector<int32_t>{1, 2}));
}

TEST(SpecNgram, RejectsBadRanges) {
  EXPECT_THROW(NgramDrafter(0, 3), std::exception);
  EXPECT_THROW(NgramDrafter(3, 2), std::exception);
}

}  // namespace
}  // namespace polykv
