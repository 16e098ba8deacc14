// The MTP drafter: the target's own nextn block (model/mtp_head.h) fed the target's final hidden
// states, drafting greedily by chaining the head (draft j+1 reads draft j's token and the head's
// output hidden state y_j). Deterministic, so it reports no probabilities (q is one-hot).
//
// State, per sequence: the head's one-layer KV. Invariants:
//  - rows [0, base) of the KV were computed from real target hidden states (row t: hidden h_t and
//    token t + 1 of the sequence); rows past base are chained draft rows, dropped before new rows go in;
//  - target_hidden() rows wait in `pend_` (positions pend_pos0_ ...) until draft() knows the token that
//    follows each (the context), so rows of rejected drafts are never used (draft() reads only rows
//    t <= len(context) - 2), which is the rollback after a verify step;
//  - prefill() runs the head over the waiting rows but the last one (t <= len(context) - 3), so that a
//    long prompt (or a context filled before it) is not paid inside the first draft; the last row
//    stays waiting because the first draft needs its output;
//  - a catch-up call computes logits for its last row only (the only prediction a draft reads); the
//    other rows only fill the head's KV.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/spec/drafter.h"
#include "kv/owned_paged_kv.h"
#include "model/mtp_head.h"

namespace polykv {

class Model;

class MtpDrafter final : public Drafter {
 public:
  // max_tokens: the longest sequence it will see (the head's KV holds that plus the draft chain).
  MtpDrafter(std::unique_ptr<MtpHead> head, int max_tokens);

  std::string name() const override { return "mtp"; }
  void draft(std::span<const int32_t> context, int max_n, std::vector<int32_t>& out, DraftProbs* probs) override;
  void prefill(std::span<const int32_t> context) override;
  void accept(std::span<const int32_t> context, int n_accepted) override;
  bool needs_target_hidden() const override { return true; }
  void target_hidden(const float* hidden, int n_rows, int pos0) override;

  const KvSequence& kv() const { return kv_; }  // for tests

 private:
  static constexpr int kChain = 64;      // KV room for chained draft rows past max_tokens
  static constexpr int kChunk = 256;     // rows per head call when catching up (bounds the workspace)
  // Runs the head over the waiting rows pend_pos0_ .. last (row t reads token t + 1 of context) and
  // drops them from pend_; with want_last, logits_ / hid_ get row `last`'s output ([1][n_vocab],
  // [1][n_embd]). False (and nothing run) when those rows are not all waiting right after the head's
  // real rows, or when there is no row to run.
  bool catch_up(std::span<const int32_t> context, int last, bool want_last);
  std::unique_ptr<MtpHead> head_;
  OwnedPagedKv kv_;
  int n_embd_, n_vocab_;
  std::vector<float> pend_;  // [pend_rows][n_embd] target hidden states at positions pend_pos0_ ...
  int pend_pos0_ = 0;
  std::vector<float> logits_, hid_;  // head outputs of one row: [n_vocab], [n_embd]
};

// head_path: a side file holding the head (MtpHead::load), or "" for the model's own nextn layers.
// Throws Error "this model has no MTP (nextn) layers" when it has none and no head_path is given.
std::unique_ptr<Drafter> make_mtp_drafter(Model& target, int max_tokens, const std::string& head_path = "");

}  // namespace polykv
