// One row of tokens through the model from position 0, a chunk of tokens per forward pass, with the
// logits of every position returned. Row t of a chunk's logits predicts the token at position t + 1.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "eval/kv_types.h"
#include "model/model.h"

namespace polykv {

class RowForward {
 public:
  // max_tokens: the longest row it will see (the KV cache's size).
  RowForward(Model& model, const KvTypePair& types, int max_tokens);

  // Starts a new row with a fresh, empty KV cache.
  void reset();

  // Feeds the next tokens of the row (positions n_fed() .. n_fed() + n - 1) and returns their logits,
  // float [n][n_vocab], valid until the next call.
  const float* forward(std::span<const int32_t> tokens);

  int n_fed() const { return kv_ ? kv_->n_tokens() : 0; }
  int n_vocab() const { return n_vocab_; }

 private:
  Model& model_;
  KvTypePair types_;
  int max_tokens_;
  int n_vocab_;
  std::unique_ptr<KvCache> kv_;
  std::vector<float> logits_;
};

}  // namespace polykv
