// Speculative decoding: a Drafter proposes the next few tokens of a sequence; the target model
// verifies them in one forward step (k + 1 rows, all logits) and keeps the longest prefix its own
// sampling agrees with, plus one token of its own (the "bonus" token). Drafters implemented:
//   - NgramDrafter     (engine/spec/ngram_drafter.h): copies what followed an earlier occurrence of
//                      the context's last n-gram (prompt lookup); no model.
//   - DraftModelDrafter(engine/spec/draft_model_drafter.h): a small model with the target's vocabulary,
//                      its own KV kept in step with the target's.
//   - MtpDrafter       (engine/spec/mtp_drafter.h): the target's own next-token-prediction block
//                      (GGUF `blk.N.nextn.*`, model/mtp_head.h), fed the target's final hidden states.
//
// The contract between the speculative loop (engine/spec/speculative.h) and a drafter, per sequence:
//   1. draft(context, max_n, out): context = every token of the sequence so far (prompt + accepted
//      output); the target's KV holds all of them but the last. The drafter appends 0..max_n tokens
//      to `out` (cleared by the caller). 0 tokens means "nothing worth verifying": the loop then does
//      an ordinary one-token step.
//   2. The loop verifies [last context token, drafts...] with the target and accepts n of the drafts
//      (0 <= n <= drafted), then appends the target's own next token.
//   3. accept(context, n_accepted): context is now the whole sequence again (old context + n accepted
//      drafts + the target's token). A drafter with state (a draft model's KV, MTP KV) rolls it back to
//      what the accepted tokens leave valid. It is called after every verify step, also when
//      nothing was drafted (n_accepted = 0).
//   4. needs_target_hidden(): if true, the loop asks the target for its final hidden states (after
//      output_norm) of every verify row and of every prompt row and passes them with
//      target_hidden() before the matching accept() (prompt: once after prefill, before the first draft).
//
// Sampling (temperature > 0): a drafter that samples its tokens from a distribution q reports q per
// drafted token (probabilities over the vocabulary, after the same sampling chain the target uses) so
// the loop can apply the speculative-sampling acceptance rule (accept d with min(1, p(d)/q(d)), on a
// rejection draw from norm(max(0, p - q))), which keeps the target's distribution exactly. A
// deterministic drafter (n-gram, or greedy drafting) reports nothing: q is one-hot at its token.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace polykv {

// Per drafted token, the drafter's probabilities over the vocabulary ([n_vocab] each), or empty
// when the drafts are deterministic (one-hot q).
using DraftProbs = std::vector<std::vector<float>>;

class Drafter {
 public:
  virtual ~Drafter() = default;
  // "ngram", "draft", "mtp": the value of --spec that chose it.
  virtual std::string name() const = 0;

  // Appends up to max_n (>= 1) proposed tokens following `context` to out; probs (may be null)
  // receives one distribution per drafted token if the drafter sampled them (see above).
  virtual void draft(std::span<const int32_t> context, int max_n, std::vector<int32_t>& out, DraftProbs* probs) = 0;

  // Optional: called once with the prompt after the target's prefill, before the first draft(). A
  // drafter with its own KV (a draft model) fills it here so that the prompt's cost is not paid
  // inside the first decode step; without the call it catches up in draft().
  virtual void prefill(std::span<const int32_t> prompt) { (void)prompt; }

  // After a verify step: `context` is the whole sequence, the last n_accepted + 1 tokens of which are
  // new (n_accepted accepted drafts, then the target's token).
  virtual void accept(std::span<const int32_t> context, int n_accepted) = 0;

  // The target's final hidden states (after output_norm), host memory [n_rows][n_embd], for the rows
  // at positions pos0 .. pos0 + n_rows - 1 that the target has just computed. Only called when
  // needs_target_hidden().
  // Tokens of the context the last draft() had to feed before drafting (a drafter with its own KV
  // catching up: the whole prompt or pool on a first draft, 1-2 tokens while drafting every step, the
  // steps since its last draft on a probe). The adaptive policy (spec_policy.h) learns a drafter's
  // cost only from drafts that caught up at most kSteadyCatchUp tokens, so a first draft's prefill
  // does not count as drafting, while probes after up to 16 steps without drafts still do (before
  // 2026-12-01d the bound was 2: a sequence that stopped drafting never measured its drafter again
  // and kept a stale, possibly far too high, cost).
  static constexpr int kSteadyCatchUp = 24;
  virtual int last_catch_up() const { return 0; }

  // Sources (2026-12-04): a drafter made of two (HybridDrafter: n-gram, else a model) says which one its
  // next draft() for `context` will come from, before the adaptive policy plans that draft; the policy keeps
  // one acceptance estimate and one cost fit per source (their drafts are accepted and cost very
  // differently: one estimate over both once kept a hybrid from drafting where either alone would).
  // Deterministic: the draft() that follows with the same context drafts from that source.
  static constexpr int kMaxSources = 2;
  virtual int next_source(std::span<const int32_t> context) {
    (void)context;
    return 0;
  }
  // The name a source's cost fit and statistics go under (name() for a drafter of one source).
  virtual std::string source_name(int source) const {
    (void)source;
    return name();
  }

  virtual bool needs_target_hidden() const { return false; }
  virtual void target_hidden(const float* hidden, int n_rows, int pos0) {
    (void)hidden;
    (void)n_rows;
    (void)pos0;
  }
};

}  // namespace polykv
