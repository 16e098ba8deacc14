#include "engine/spec/hybrid_drafter.h"

#include <algorithm>
#include <cstdlib>

#include "core/error.h"

namespace polykv {

HybridDrafter::HybridDrafter(std::unique_ptr<Drafter> model_drafter, int model_n_max, int min_match)
    : ngram_(1, NgramDrafter::kDefaultNMax), model_(std::move(model_drafter)), model_n_max_(model_n_max),
      min_match_(min_match) {
  check(model_ != nullptr, "ngram+ drafter: no model drafter");
  check(model_n_max >= 1 && min_match >= 1 && min_match <= NgramDrafter::kDefaultNMax,
        "ngram+ drafter: need model_n_max >= 1 and 1 <= min_match <= ", NgramDrafter::kDefaultNMax);
  if (const char* e = std::getenv("POLYKV_HYBRID_MIN_MATCH")) min_match_ = std::clamp(std::atoi(e), 1, 3);
}

void HybridDrafter::draft(std::span<const int32_t> context, int max_n, std::vector<int32_t>& out, DraftProbs* probs) {
  model_drafted_ = false;
  if (max_n <= 0) return;
  const size_t n0 = out.size();
  ngram_.draft(context, max_n, out, nullptr);
  if (out.size() > n0 && ngram_.last_match() >= min_match_) {
    ++ngram_drafts_;
    return;
  }
  out.resize(n0);
  model_drafted_ = true;
  ++model_drafts_;
  model_->draft(context, std::min(max_n, model_n_max_), out, probs);
}

int HybridDrafter::next_source(std::span<const int32_t> context) {
  scratch_.clear();
  ngram_.draft(context, 1, scratch_, nullptr);  // the same match draft() would find
  return !scratch_.empty() && ngram_.last_match() >= min_match_ ? 0 : 1;
}

void HybridDrafter::prefill(std::span<const int32_t> prompt) {
  ngram_.prefill(prompt);
  model_->prefill(prompt);
}

void HybridDrafter::accept(std::span<const int32_t> context, int n_accepted) {
  ngram_.accept(context, n_accepted);
  model_->accept(context, n_accepted);
}

}  // namespace polykv
