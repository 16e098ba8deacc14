#include "eval/row_forward.h"

#include "core/error.h"

namespace polykv {

RowForward::RowForward(Model& model, const KvTypePair& types, int max_tokens)
    : model_(model), types_(types), max_tokens_(max_tokens), n_vocab_(model.config().n_vocab) {
  reset();
}

void RowForward::reset() { kv_ = make_kv_cache(model_, types_, max_tokens_); }

const float* RowForward::forward(std::span<const int32_t> tokens) {
  check(!tokens.empty(), "empty chunk");
  logits_.resize(tokens.size() * size_t(n_vocab_));
  model_.forward(tokens, *kv_, logits_.data(), /*all_logits=*/true);
  return logits_.data();
}

}  // namespace polykv
