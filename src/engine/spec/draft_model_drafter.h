// A draft model: a smaller model with the target's vocabulary proposes tokens greedily (so q is
// one-hot, see drafter.h). It runs on the target's backend with its own KV, kept in step with the
// sequence: the KV holds a prefix of the context (`kv_tokens_` mirrors its ids); draft() first feeds
// what the KV lacks, then one token per drafted token; accept() rolls the KV back to the longest
// prefix still valid (the accepted drafts stay, the rejected ones go).
//
// Several sequences drafting with one draft model in the same engine step draft together
// (draft_many): one forward_batch of the draft model per draft position over all of them, as the
// target's step does, so the draft model's weights are read once per position, not once per sequence.
//
// Invariant between calls: kv_->n_tokens() == kv_tokens_.size(), and kv_tokens_ is what was fed.
#pragma once
#include <memory>
#include <span>

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

class DraftModelDrafter;

// One sequence's part of DraftModelDrafter::draft_many: the arguments of its draft() call.
struct DraftJob {
  DraftModelDrafter* drafter = nullptr;
  std::span<const int32_t> context;
  int max_n = 0;
  std::vector<int32_t>* out = nullptr;  // appended to
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
  int last_catch_up() const override { return last_catch_up_; }

  // draft() for several sequences at once. Rules: the drafters are distinct and share one draft
  // model (else Error); each job's drafts and KV end up exactly as its own draft() call would leave
  // them (forward_batch's rows do not depend on their batch companions). The forward passes: one
  // batch per round of catch-up tokens (what each KV lacks of its context, in chunks of
  // prefill_chunk; usually 1-2 tokens after a verify step), then one batch per further draft position
  // over the jobs still drafting, each with one token. Returns the number of forward_batch calls.
  static int draft_many(std::span<const DraftJob> jobs);

  // Sharing a prefix (agents on one pool: the pool's tokens are fed to the draft model once, not once
  // per agent). The tokens the KV holds now:
  std::span<const int32_t> cached_tokens() const { return kv_tokens_; }
  // Feeds `tokens` after what the KV holds (no logits): fills a pool's shared draft KV.
  void extend(std::span<const int32_t> tokens) { feed(tokens, false); }
  // Into this drafter's empty KV, copies src's KV over the longest prefix that src holds and `context`
  // starts with, at most `limit` tokens. Returns the tokens copied: 0 when this KV is not empty or the
  // KVs cannot be copied (only host KvCaches with f16 K and V and full-attention layers can; the copy
  // is exact: f16 -> f32 -> f16). The next draft() catches up from there, and its last_catch_up()
  // counts the copied tokens too (a copy is not steady drafting for the policy's cost).
  int copy_prefix_from(const DraftModelDrafter& src, std::span<const int32_t> context, size_t limit);

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
  int last_catch_up_ = 0;      // context tokens the last draft fed before drafting (copied ones included)
  int copied_ = 0;             // tokens copy_prefix_from put in the KV since the last draft
};

}  // namespace polykv
