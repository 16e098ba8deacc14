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
//
// Several sequences drafting in one engine step draft together (draft_many): one head forward per
// round over all of them (MtpHead::forward_batch), so the head's weights and the output matrix are
// read once per round, not once per sequence. Agents on one pool share the head's rows over the pool
// (copy_prefix_from): one catch-up per pool, copied into each agent's KV (2026-12-01g).
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
class MtpDrafter;

// One sequence's part of MtpDrafter::draft_many: the arguments of its draft() call.
struct MtpJob {
  MtpDrafter* drafter = nullptr;
  std::span<const int32_t> context;
  int max_n = 0;
  std::vector<int32_t>* out = nullptr;  // appended to
};

class MtpDrafter final : public Drafter {
 public:
  // max_tokens: the longest sequence it will see (the head's KV holds that plus the draft chain).
  // Several drafters may share one head if they run one at a time (its workspace is its own).
  MtpDrafter(std::shared_ptr<MtpHead> head, int max_tokens);

  std::string name() const override { return "mtp"; }
  void draft(std::span<const int32_t> context, int max_n, std::vector<int32_t>& out, DraftProbs* probs) override;
  void prefill(std::span<const int32_t> context) override;
  void accept(std::span<const int32_t> context, int n_accepted) override;
  bool needs_target_hidden() const override { return true; }
  void target_hidden(const float* hidden, int n_rows, int pos0) override;
  // Rows the last draft's catch-up ran, plus rows copied since the draft before (not steady drafting).
  int last_catch_up() const override { return last_catch_up_; }

  // draft() for several sequences at once. Rules: the drafters are distinct and share one head (else
  // Error); each job's drafts and KV end up exactly as its own draft() call would leave them
  // (forward_batch's sequences do not depend on their companions). Passes: one per round of catch-up
  // rows (each job's waiting rows in chunks of kChunk; usually 1-4 after a verify step), then one per
  // further draft position over the jobs still drafting, one row each. Returns the head passes run.
  static int draft_many(std::span<const MtpJob> jobs);

  // Sharing a pool's rows (agents on one named pool: the head runs over the pool once, not once per
  // agent). fill(): runs the head over every waiting row whose next token `context` holds (rows t <=
  // len(context) - 2, no logits) and remembers the context: how a pool's shared drafter is made
  // (target_hidden(pool's hidden states, n, 0), then fill(pool's tokens)).
  void fill(std::span<const int32_t> context);
  // Copies src's rows (made by fill()) into this drafter's KV, in one of two cases:
  //  - rows wait here from position 0 (a fresh or readmitted sequence given all its hidden states):
  //    the longest prefix valid for `context` (rows t with context[0 .. t + 1] equal to src's filled
  //    context), at most the rows waiting; the copied rows leave the waiting ones;
  //  - a gap: the waiting rows start at m > 0 and the KV holds fewer than m rows (an agent given only
  //    its pool's last hidden row): exactly rows [0, m), if src holds them all for `context`.
  // Exact (the same bits as running the head over them here, since a head row depends only on its
  // hidden state, its token and the rows before) PROVIDED the hidden states src was filled with are
  // this sequence's: the caller's contract (the engine gives both its pool's Pool::hidden). Returns
  // the rows copied: 0 in neither case, when src holds too few, or when src has another head.
  int copy_prefix_from(const MtpDrafter& src, std::span<const int32_t> context);
  // Whether copy_prefix_from has something to do (one of its two cases).
  bool wants_prefix() const { return (pend_pos0_ == 0 && !pend_.empty()) || kv_.n_tokens() < pend_pos0_; }

  const KvSequence& kv() const { return kv_; }  // for tests
  const std::shared_ptr<MtpHead>& head() const { return head_; }

 private:
  static constexpr int kChain = 64;      // KV room for chained draft rows past max_tokens
  static constexpr int kChunk = 256;     // rows per head call when catching up (bounds the workspace)
  // Readies the head to run the waiting rows pend_pos0_ .. last (row t reads token t + 1 of context):
  // drops chained draft rows; returns the number of rows, or -1 when those rows are not all waiting
  // right after the head's real rows, or there is no row to run (nothing run).
  int begin_catch_up(std::span<const int32_t> context, int last);
  // Drops `rows` rows from the front of pend_ (they are in the KV now).
  void end_catch_up(int rows);
  // Runs begin_catch_up's rows now, alone; with want_last, logits_ / hid_ get row `last`'s output.
  bool catch_up(std::span<const int32_t> context, int last, bool want_last);
  struct CatchUp;
  // Runs several drafters' catch-ups (begun) together: one head pass per round of up to kChunk rows
  // each; ends them. Returns the passes.
  static int run_catch_ups(MtpHead& head, std::span<CatchUp> cs);

  std::shared_ptr<MtpHead> head_;
  OwnedPagedKv kv_;
  int n_embd_, n_vocab_;
  std::vector<float> pend_;  // [pend_rows][n_embd] target hidden states at positions pend_pos0_ ...
  int pend_pos0_ = 0;
  std::vector<float> logits_, hid_;  // head outputs of one row: [n_vocab], [n_embd]
  std::vector<float> h_;             // [n_embd]: the hidden state the next chained draft reads
  int32_t tok_ = 0;                  // the last draft (the next chained row's token)
  std::vector<int32_t> filled_;      // fill(): the context the rows were made for
  int last_catch_up_ = 0;
  int copied_ = 0;                   // rows copy_prefix_from put in the KV since the last draft
};

// head_path: a side file holding the head (MtpHead::load), or "" for the model's own nextn layers.
// Throws Error "this model has no MTP (nextn) layers" when it has none and no head_path is given.
std::shared_ptr<MtpHead> load_mtp_head(Model& target, const std::string& head_path = "");
std::unique_ptr<Drafter> make_mtp_drafter(Model& target, int max_tokens, const std::string& head_path = "");

}  // namespace polykv
