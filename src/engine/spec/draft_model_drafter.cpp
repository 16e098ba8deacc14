#include "engine/spec/draft_model_drafter.h"

#include <algorithm>

#include "core/error.h"
#include "engine/sequence_kv.h"

namespace polykv {

void check_draft_vocab(const Model& target, const Model& draft) {
  const int nt = target.config().n_vocab, nd = draft.config().n_vocab;
  check(nt == nd, "--model-draft: the draft model's vocabulary has ", nd, " tokens, the target's ", nt,
        "; a draft model must share the target's vocabulary");
  const char* key = "tokenizer.ggml.tokens";
  check(target.gguf().has(key) && draft.gguf().has(key), "--model-draft: both models need ", key,
        " to compare their vocabularies");
  const auto a = target.gguf().get_str_array(key), b = draft.gguf().get_str_array(key);
  check(a.size() == b.size(), "--model-draft: the vocabularies differ in size (", a.size(), " vs ", b.size(), ")");
  for (size_t i = 0; i < a.size(); ++i)
    check(a[i] == b[i], "--model-draft: the vocabularies differ at token ", i, " (target '", a[i].substr(0, 40),
          "', draft '", b[i].substr(0, 40), "'); a draft model must share the target's tokenizer");
}

DraftModelDrafter::DraftModelDrafter(Model& draft, const DraftModelOptions& o) : model_(draft), opts_(o) {
  SequenceKvOptions kvo;
  kvo.k_type = o.k_type;
  kvo.v_type = o.v_type;
  kvo.max_tokens = o.max_tokens;
  kvo.rollback_tokens = 17;  // more than the longest draft (16) plus one
  kv_ = make_sequence_kv(model_, kvo);
  logits_.resize(size_t(model_.config().n_vocab));
}

void DraftModelDrafter::feed(std::span<const int32_t> tokens, bool want_logits) {
  const size_t chunk = size_t(std::max(1, opts_.prefill_chunk));
  for (size_t i = 0; i < tokens.size(); i += chunk) {
    const size_t n = std::min(chunk, tokens.size() - i);
    const bool last = i + n == tokens.size();
    model_.forward(tokens.subspan(i, n), *kv_, want_logits && last ? logits_.data() : nullptr, false);
  }
  kv_tokens_.insert(kv_tokens_.end(), tokens.begin(), tokens.end());
}

void DraftModelDrafter::rollback(std::span<const int32_t> context, size_t limit) {
  size_t keep = 0;
  const size_t n = std::min({kv_tokens_.size(), context.size(), limit});
  while (keep < n && kv_tokens_[keep] == context[keep]) ++keep;
  if (keep < kv_tokens_.size()) {
    truncate_sequence_kv(*kv_, int(keep));
    kv_tokens_.resize(keep);
  }
}

void DraftModelDrafter::prefill(std::span<const int32_t> prompt) {
  if (prompt.size() < 2) return;
  rollback(prompt, prompt.size() - 1);
  feed(prompt.subspan(kv_tokens_.size(), prompt.size() - 1 - kv_tokens_.size()), false);
}

void DraftModelDrafter::draft(std::span<const int32_t> context, int max_n, std::vector<int32_t>& out,
                              DraftProbs* probs) {
  (void)probs;  // greedy drafts: q is one-hot
  if (context.empty() || max_n <= 0) return;
  // Room for the context and max_n - 1 fed drafts.
  const int room = kv_->max_tokens() - int(context.size());
  max_n = std::min(max_n, room + 1);
  if (max_n <= 0) return;
  // Everything up to and including the last context token, so that logits_ predicts the next one.
  rollback(context, context.size() - 1);
  feed(context.subspan(kv_tokens_.size()), true);
  const int32_t n_vocab = model_.config().n_vocab;
  for (int i = 0; i < max_n; ++i) {
    const int32_t d = int32_t(std::max_element(logits_.begin(), logits_.begin() + n_vocab) - logits_.begin());
    out.push_back(d);
    if (i + 1 < max_n) feed(std::span(&d, 1), true);
  }
}

void DraftModelDrafter::accept(std::span<const int32_t> context, int n_accepted) {
  (void)n_accepted;
  // Keep what is still the sequence (the accepted drafts); the next draft() feeds the rest.
  rollback(context, context.size());
}

}  // namespace polykv
