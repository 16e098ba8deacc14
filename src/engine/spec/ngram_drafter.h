// Prompt lookup: drafts copied from the context itself. Among the earlier occurrences of the
// context's last n_min tokens, take the one whose match with the context's end extends furthest back
// (at most n_max tokens; the most recent on ties) and propose the tokens that followed it (up to
// max_n). Equivalently: for n from n_max down to n_min, the most recent earlier occurrence of the
// context's last n tokens. No model, no state beyond an index of the context's tokens.
//
// Index: per token id, the positions just after its occurrences (its followers), in order. A draft
// scans the last kMaxScan occurrences of the context's last token, newest first, extending each match
// backwards (at most n_max tokens), and stops at the first match of n_max tokens. So a draft costs at
// most kMaxScan * n_max token compares whatever the context length (only a token seen more than
// kMaxScan times can miss an older, longer match), and the index grows by one entry per token.
//
// The context passed to draft() normally extends the one seen before; if it does not (a shorter
// or different sequence), the index is rebuilt from scratch.
#pragma once
#include <unordered_map>

#include "engine/spec/drafter.h"

namespace polykv {

class NgramDrafter final : public Drafter {
 public:
  // Defaults chosen by measurement (docs/SPECULATIVE.md): 1..3. Longer caps (8..32, 2026-12-01f,
  // bench/spec_ngram_sim.py) gain on some texts and lose on others: no consistent gain.
  static constexpr int kDefaultNMin = 1, kDefaultNMax = 3;
  static constexpr int kMaxScan = 1024;  // occurrences of the last token examined per draft
  explicit NgramDrafter(int n_min = kDefaultNMin, int n_max = kDefaultNMax);

  std::string name() const override { return "ngram"; }
  void draft(std::span<const int32_t> context, int max_n, std::vector<int32_t>& out, DraftProbs* probs) override;
  void accept(std::span<const int32_t> context, int n_accepted) override;
  void prefill(std::span<const int32_t> prompt) override { sync(prompt); }
  // The match length behind the last draft() (0: no earlier occurrence of the context's last token).
  int last_match() const { return last_match_; }

 private:
  void sync(std::span<const int32_t> context);  // index every token with a follower in context

  int n_min_, n_max_;
  std::vector<int32_t> tokens_;  // the context indexed so far
  int last_match_ = 0;
  int indexed_ = 0;              // follower positions j < indexed_ are indexed
  std::unordered_map<int32_t, std::vector<int32_t>> followers_;  // token -> positions j with tokens_[j - 1] == token
};

}  // namespace polykv
