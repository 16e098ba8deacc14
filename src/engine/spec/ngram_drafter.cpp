#include "engine/spec/ngram_drafter.h"

#include <algorithm>

#include "core/error.h"

namespace polykv {

NgramDrafter::NgramDrafter(int n_min, int n_max) : n_min_(n_min), n_max_(n_max) {
  check(n_min >= 1 && n_max >= n_min && n_max <= 64, "ngram drafter: need 1 <= n_min <= n_max <= 64, got ", n_min,
        "..", n_max);
}

void NgramDrafter::sync(std::span<const int32_t> context) {
  const size_t L = context.size();
  // Still an extension of what was indexed? (Compare the last indexed token and the length: the
  // callers only ever grow the context; anything else rebuilds.)
  bool extends = tokens_.size() <= L && (tokens_.empty() || tokens_.back() == context[tokens_.size() - 1]);
  if (!extends) {
    tokens_.clear();
    indexed_ = 0;
    followers_.clear();
  }
  tokens_.insert(tokens_.end(), context.begin() + std::ptrdiff_t(tokens_.size()), context.end());
  // Position j has a follower when j < L: register it under the token before it.
  for (int j = std::max(indexed_, 1); j < int(L); ++j) followers_[tokens_[size_t(j - 1)]].push_back(j);
  indexed_ = std::max(indexed_, int(L));
}

void NgramDrafter::draft(std::span<const int32_t> context, int max_n, std::vector<int32_t>& out, DraftProbs* probs) {
  (void)probs;  // deterministic drafts: q is one-hot
  last_match_ = 0;
  if (context.empty() || max_n <= 0) return;
  // The last position (L - 1) has no follower yet, so it is not among the followers: every
  // candidate is an earlier occurrence.
  sync(context);
  const int L = int(tokens_.size());
  auto it = followers_.find(tokens_[size_t(L - 1)]);
  if (it == followers_.end()) return;
  const std::vector<int32_t>& occ = it->second;
  int best = -1, best_len = 0;
  const int n_scan = std::min(int(occ.size()), kMaxScan);
  for (int o = int(occ.size()) - 1; o >= int(occ.size()) - n_scan; --o) {  // newest first
    const int j = occ[size_t(o)];
    // Match length m: tokens_[j - m, j) == tokens_[L - m, L), at most n_max (and j tokens).
    int m = 1;
    const int cap = std::min(n_max_, j);
    while (m < cap && tokens_[size_t(j - m - 1)] == tokens_[size_t(L - m - 1)]) ++m;
    if (m > best_len) {  // strictly longer: the newest of equal matches stays
      best = j;
      best_len = m;
      if (m == n_max_) break;
    }
  }
  if (best < 0 || best_len < n_min_) return;
  last_match_ = best_len;
  const size_t n0 = out.size();  // appends (drafter.h): at most max_n new tokens
  for (int i = best; i < L && int(out.size() - n0) < max_n; ++i) out.push_back(tokens_[size_t(i)]);
}

void NgramDrafter::accept(std::span<const int32_t> context, int n_accepted) {
  (void)context;  // the index catches up on the next draft()
  (void)n_accepted;
}

}  // namespace polykv
