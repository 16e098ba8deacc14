// Prompt lookup: drafts copied from the context itself. For n from n_max down to n_min, find the most
// recent earlier occurrence of the context's last n tokens and propose the tokens that followed it
// (up to max_n). No model, no state beyond an index of the context's n-grams.
//
// Index: for each n in [n_min, n_max], a hash map from an n-gram to the position just after its
// latest occurrence that has a following token. It is updated incrementally as the context grows
// (O(n_max) per new token), so a draft costs O(n_max + max_n) whatever the context length. Hash
// collisions are harmless: a hit is confirmed by comparing the tokens.
//
// The context passed to draft() normally extends the one seen before; if it does not (a shorter
// or different sequence), the index is rebuilt from scratch.
#pragma once
#include <unordered_map>

#include "engine/spec/drafter.h"

namespace polykv {

class NgramDrafter final : public Drafter {
 public:
  // Defaults chosen by measurement (docs/SPECULATIVE.md).
  static constexpr int kDefaultNMin = 1, kDefaultNMax = 3;
  explicit NgramDrafter(int n_min = kDefaultNMin, int n_max = kDefaultNMax);

  std::string name() const override { return "ngram"; }
  void draft(std::span<const int32_t> context, int max_n, std::vector<int32_t>& out, DraftProbs* probs) override;
  void accept(std::span<const int32_t> context, int n_accepted) override;
  void prefill(std::span<const int32_t> prompt) override { sync(prompt); }

 private:
  void sync(std::span<const int32_t> context);  // index every n-gram with a follower in context
  uint64_t key(const int32_t* first, int n) const;

  int n_min_, n_max_;
  std::vector<int32_t> tokens_;  // the context indexed so far
  int indexed_ = 0;              // positions j (the follower's position) indexed: j < indexed_
  std::vector<std::unordered_map<uint64_t, int32_t>> index_;  // [n - n_min]: n-gram -> follower position
};

}  // namespace polykv
