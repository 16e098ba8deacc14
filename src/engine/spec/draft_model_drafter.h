// A draft model: a smaller model with the target's vocabulary proposes tokens greedily (so q is
// one-hot, see drafter.h). It runs on the target's backend with its own KV, kept in step with the
// sequence: the KV holds a prefix of the context (`kv_tokens_` mirrors its ids); draft() first feeds
// what the KV lacks, then one token per drafted token; accept() rolls the KV back to the longest
// prefix still valid (the accepted drafts stay, the rejected ones go).
//
// Invariant between calls: kv_->n_tokens() == kv_tokens_.size(), and kv_tokens_ is what was fed.
#pragma once
#include <memory>

#include "engine/spec/drafter.h"
#include "kv/kv_sequence.h"
#include "model/model.h"

namespace polykv {

// Throws Error unless the two models share the vocabulary: the same n_vocab and the same token
// strings (tokenizer.ggml.tokens) in the same order.
void check_draft_vocab(const Model& target, const Model& draft);

struct DraftModelOptions {
  std::string k_type = "f16", v_type = "f16";
  int max_tokens = 0;      // the KV's context (> 0): the target's context plus the drafts
  int prefill_chunk = 512;
};

class DraftModelDrafter final : public Drafter {
 public:
  // `draft` must outlive the drafter; several drafters may share one model if they run one at a
  // time (Model::forward is not reentrant).
  DraftModelDrafter(Model& draft, const DraftModelOptions& o);

  std::string name() const override { return "draft"; }
  void draft(std::span<const int32_t> context, int max_n, std::vector<int32_t>& out, DraftProbs* probs) override;
  void accept(std::span<const int32_t> context, int n_accepted) override;
  void prefill(std::span<const int32_t> prompt) override;

 private:
  // Rolls the KV back to its longest prefix shared with `context`, keeping at most `limit` tokens.
  void rollback(std::span<const int32_t> context, size_t limit);
  // Feeds tokens, logits of the last into logits_ when want_logits.
  void feed(std::span<const int32_t> tokens, bool want_logits);

  Model& model_;
  DraftModelOptions opts_;
  std::unique_ptr<KvSequence> kv_;
  std::vector<int32_t> kv_tokens_;
  std::vector<float> logits_;  // [n_vocab]
};

}  // namespace polykv
