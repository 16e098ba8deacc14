// N-gram first, a model where the context has no match: `--spec ngram+mtp` / `ngram+draft`.
//
// Prompt lookup (NgramDrafter) is free and, where the text repeats its context, accepted at 80-95%; where it
// does not, it finds no match (or a one-token one, rarely accepted) and the step decodes one token. A model
// drafter (the MTP head, a draft model) costs a pass per drafted token but drafts everywhere. This drafter asks
// the n-gram index first and keeps its drafts when their match is at least min_match tokens long; otherwise
// it lets the model drafter draft, at most model_n_max tokens (the model drafter's own default n-max: past it
// each draft costs more than it is likely to return, while n-gram drafts run to --spec-n-max).
//
// Both drafters see every step (accept, and the target's hidden states for the MTP head), so the model
// drafter's state stays valid while the n-gram drafts: its own rows catch up lazily at its next draft (the
// MTP head runs each waiting row once, in one batched pass; a draft model feeds the tokens it has not seen),
// so a stretch of n-gram steps costs the model drafter nothing until it drafts again.
//
// Two sources for the adaptive policy (spec_policy.h, Drafter::next_source): 0 the n-gram index, 1 the model
// drafter, each with its own acceptance estimate and cost fit. last_catch_up() is the model drafter's on the
// steps it drafted and 0 on n-gram steps (which feed nothing).
#pragma once
#include <memory>

#include "engine/spec/drafter.h"
#include "engine/spec/ngram_drafter.h"

namespace polykv {

class HybridDrafter final : public Drafter {
 public:
  // min_match 1 / 2 / 3 measured alike (docs/SPECULATIVE.md "2026-12-04b: n-gram first, then the MTP head").
  static constexpr int kDefaultMinMatch = 2;
  HybridDrafter(std::unique_ptr<Drafter> model_drafter, int model_n_max, int min_match = kDefaultMinMatch);

  std::string name() const override { return "ngram+" + model_->name(); }
  void draft(std::span<const int32_t> context, int max_n, std::vector<int32_t>& out, DraftProbs* probs) override;
  void prefill(std::span<const int32_t> prompt) override;
  void accept(std::span<const int32_t> context, int n_accepted) override;
  int next_source(std::span<const int32_t> context) override;
  std::string source_name(int source) const override { return source == 0 ? ngram_.name() : model_->name(); }
  int last_catch_up() const override { return model_drafted_ ? model_->last_catch_up() : 0; }
  bool needs_target_hidden() const override { return model_->needs_target_hidden(); }
  void target_hidden(const float* hidden, int n_rows, int pos0) override { model_->target_hidden(hidden, n_rows, pos0); }

  // The model drafter (the engine gives an MTP head its pool's shared rows through it).
  Drafter& model_drafter() { return *model_; }
  // Which drafter made the last draft (tests, statistics): true for the model drafter.
  bool model_drafted() const { return model_drafted_; }
  int64_t ngram_drafts() const { return ngram_drafts_; }
  int64_t model_drafts() const { return model_drafts_; }

 private:
  NgramDrafter ngram_;
  std::unique_ptr<Drafter> model_;
  int model_n_max_, min_match_;
  bool model_drafted_ = false;
  std::vector<int32_t> scratch_;  // next_source's n-gram draft
  int64_t ngram_drafts_ = 0, model_drafts_ = 0;  // draft() calls answered by each
};

}  // namespace polykv
