#include "engine/spec/ngram_drafter.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace polykv {

NgramDrafter::NgramDrafter(int n_min, int n_max) : n_min_(n_min), n_max_(n_max) {
  check(n_min >= 1 && n_max >= n_min && n_max <= 16, "ngram drafter: need 1 <= n_min <= n_max <= 16, got ", n_min,
        "..", n_max);
  index_.resize(size_t(n_max - n_min + 1));
}

uint64_t NgramDrafter::key(const int32_t* first, int n) const {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ uint64_t(n);
  for (int i = 0; i < n; ++i) {
    h ^= uint64_t(uint32_t(first[i])) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
  }
  return h;
}

void NgramDrafter::sync(std::span<const int32_t> context) {
  const size_t L = context.size();
  // Still an extension of what was indexed? (Compare the last indexed token and the length: the
  // callers only ever grow the context; anything else rebuilds.)
  bool extends = tokens_.size() <= L && (tokens_.empty() || tokens_.back() == context[tokens_.size() - 1]);
  if (!extends) {
    tokens_.clear();
    indexed_ = 0;
    for (auto& m : index_) m.clear();
  }
  tokens_.insert(tokens_.end(), context.begin() + std::ptrdiff_t(tokens_.size()), context.end());
  // Position j has a follower when j < L; register every n-gram ending at j - 1 with follower j.
  for (int j = std::max(indexed_, 1); j < int(L); ++j)
    for (int n = n_min_; n <= n_max_ && n <= j; ++n)
      index_[size_t(n - n_min_)][key(&tokens_[size_t(j - n)], n)] = j;  // later occurrences win
  indexed_ = std::max(indexed_, int(L));
}

void NgramDrafter::draft(std::span<const int32_t> context, int max_n, std::vector<int32_t>& out, DraftProbs* probs) {
  (void)probs;  // deterministic drafts: q is one-hot
  if (context.empty() || max_n <= 0) return;
  // The last position (L - 1) has no follower yet: the query n-gram ends there and was not indexed
  // as a key with itself as the follower, so a hit is always an earlier occurrence.
  sync(context);
  const int L = int(tokens_.size());
  for (int n = std::min(n_max_, L - 1); n >= n_min_; --n) {
    const int32_t* q = &tokens_[size_t(L - n)];
    const auto& m = index_[size_t(n - n_min_)];
    auto it = m.find(key(q, n));
    if (it == m.end()) continue;
    const int j = it->second;  // tokens_[j - n, j) should equal the query
    if (std::memcmp(&tokens_[size_t(j - n)], q, sizeof(int32_t) * size_t(n)) != 0) continue;  // a collision
    for (int i = j; i < L && int(out.size()) < max_n; ++i) out.push_back(tokens_[size_t(i)]);
    return;
  }
}

void NgramDrafter::accept(std::span<const int32_t> context, int n_accepted) {
  (void)context;  // the index catches up on the next draft()
  (void)n_accepted;
}

}  // namespace polykv
