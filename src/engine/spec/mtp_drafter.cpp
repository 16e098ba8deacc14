#include "engine/spec/mtp_drafter.h"

#include <algorithm>

#include "core/error.h"

namespace polykv {
namespace {

int32_t argmax(const float* v, int n) {  // first maximum
  return int32_t(std::max_element(v, v + n) - v);
}

}  // namespace

// One drafter's catch-up in run_catch_ups: its waiting rows from pend_pos0_, `rows` of them, `done` run so far.
struct MtpDrafter::CatchUp {
  MtpDrafter* d;
  std::span<const int32_t> context;
  int rows;
  bool want_last;  // logits_ / hid_ get the last row's output
  int done = 0;
};

int MtpDrafter::run_catch_ups(MtpHead& head, std::span<CatchUp> cs) {
  int passes = 0;
  std::vector<MtpHead::Seq> batch;
  for (;;) {  // rounds of up to kChunk rows per drafter, all drafters in one head pass
    batch.clear();
    for (CatchUp& c : cs) {
      if (c.done == c.rows) continue;
      MtpDrafter& d = *c.d;
      const int n = std::min(kChunk, c.rows - c.done);
      const bool out = c.want_last && c.done + n == c.rows;
      batch.push_back({c.context.subspan(size_t(d.pend_pos0_ + c.done + 1), size_t(n)),
                       d.pend_.data() + size_t(c.done) * size_t(d.n_embd_), &d.kv_, out ? d.logits_.data() : nullptr,
                       out ? d.hid_.data() : nullptr});
      c.done += n;
    }
    if (batch.empty()) break;
    head.forward_batch(batch);
    ++passes;
  }
  for (CatchUp& c : cs) c.d->end_catch_up(c.rows);
  return passes;
}

MtpDrafter::MtpDrafter(std::shared_ptr<MtpHead> head, int max_tokens)
    : head_(std::move(head)),
      kv_(head_->kv_shape(), KvType::F16, KvType::F16, max_tokens + kChain, 256,
          head_->target().backend().kv_memory()),
      n_embd_(head_->target().config().n_embd),
      n_vocab_(head_->target().config().n_vocab),
      logits_(size_t(n_vocab_)),
      hid_(size_t(n_embd_)),
      h_(size_t(n_embd_)) {}

void MtpDrafter::target_hidden(const float* hidden, int n_rows, int pos0) {
  const size_t E = size_t(n_embd_);
  const int pend_rows = int(pend_.size() / E);
  if (pend_rows == 0 || pos0 != pend_pos0_ + pend_rows) {  // else: continues the waiting rows (a chunked prompt)
    pend_.clear();
    pend_pos0_ = pos0;
  }
  pend_.insert(pend_.end(), hidden, hidden + size_t(n_rows) * E);
}

void MtpDrafter::accept(std::span<const int32_t> context, int n_accepted) {
  (void)n_accepted;
  // Rows of rejected drafts: row t needs token t + 1, so only t <= len(context) - 2 stay.
  const int keep = std::max(0, int(context.size()) - 1 - pend_pos0_);
  if (size_t(keep) * size_t(n_embd_) < pend_.size()) pend_.resize(size_t(keep) * size_t(n_embd_));
}

int MtpDrafter::begin_catch_up(std::span<const int32_t> context, int last) {
  // Drop chained draft rows (and any row the waiting hidden states recompute).
  if (kv_.n_tokens() > pend_pos0_) kv_.truncate(pend_pos0_);
  const int rows = last - pend_pos0_ + 1;
  if (kv_.n_tokens() != pend_pos0_ || rows <= 0 || size_t(rows) * size_t(n_embd_) > pend_.size() ||
      last + 1 >= int(context.size()))
    return -1;
  return rows;
}

void MtpDrafter::end_catch_up(int rows) {
  pend_.erase(pend_.begin(), pend_.begin() + std::ptrdiff_t(size_t(rows) * size_t(n_embd_)));
  pend_pos0_ += rows;  // == kv_.n_tokens(): the real rows end here
}

bool MtpDrafter::catch_up(std::span<const int32_t> context, int last, bool want_last) {
  const int rows = begin_catch_up(context, last);
  if (rows < 0) return false;
  CatchUp c{this, context, rows, want_last};
  run_catch_ups(*head_, std::span(&c, 1));
  return true;
}

void MtpDrafter::prefill(std::span<const int32_t> context) { (void)catch_up(context, int(context.size()) - 3, false); }

void MtpDrafter::fill(std::span<const int32_t> context) {
  (void)catch_up(context, int(context.size()) - 2, false);
  filled_.assign(context.begin(), context.end());
}

int MtpDrafter::copy_prefix_from(const MtpDrafter& src, std::span<const int32_t> context) {
  if (!wants_prefix() || src.head_ != head_) return 0;
  // Row t of src is valid here when context[0 .. t + 1] == src.filled_[0 .. t + 1].
  size_t same = 0;
  const size_t m = std::min(context.size(), src.filled_.size());
  while (same < m && context[same] == src.filled_[same]) ++same;
  const int valid = std::min(std::min(src.pend_pos0_, src.kv_.n_tokens()), int(same) - 1);  // src's usable rows
  if (pend_pos0_ > 0) {  // a gap: exactly the rows before the waiting ones, or nothing
    if (valid < pend_pos0_) return 0;
    kv_.copy_prefix_from(src.kv_, pend_pos0_);  // also drops whatever this KV held
    copied_ += pend_pos0_;
    return pend_pos0_;
  }
  const int n = std::min(valid, int(pend_.size() / size_t(n_embd_)));
  if (n <= 0) return 0;
  kv_.copy_prefix_from(src.kv_, n);  // also drops whatever this KV held (a readmitted sequence's rows)
  end_catch_up(n);
  copied_ += n;
  return n;
}

void MtpDrafter::draft(std::span<const int32_t> context, int max_n, std::vector<int32_t>& out, DraftProbs* probs) {
  (void)probs;  // greedy: q is one-hot
  const MtpJob job{this, context, max_n, &out};
  draft_many(std::span(&job, 1));
}

int MtpDrafter::draft_many(std::span<const MtpJob> jobs) {
  // The head must reach row L - 2 (hidden h_{L-2}, token L - 1) from dense real rows before it.
  std::vector<CatchUp> cs;
  std::vector<const MtpJob*> live;  // [cs]
  MtpHead* head = nullptr;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const MtpJob& j = jobs[i];
    MtpDrafter& d = *j.drafter;
    check(head == nullptr || head == d.head_.get(), "MTP draft_many: the drafters must share one head");
    head = d.head_.get();
    for (size_t o = 0; o < i; ++o) check(jobs[o].drafter != &d, "MTP draft_many: a drafter appears twice");
    if (j.max_n <= 0) continue;
    const int rows = d.begin_catch_up(j.context, int(j.context.size()) - 2);
    d.last_catch_up_ = std::max(rows, 0) + d.copied_;
    d.copied_ = 0;
    if (rows < 0) {
      d.pend_.clear();
      continue;  // nothing to draft from (a gap in the hidden states): an ordinary step follows
    }
    cs.push_back({&d, j.context, rows, true});
    live.push_back(&j);
  }
  if (cs.empty()) return 0;
  int passes = run_catch_ups(*head, cs);
  // Draft 1 from each last real row; then chain: draft j+1 from (draft j, y_j), rows above pend_pos0_,
  // one pass per draft position over the jobs still drafting.
  for (const MtpJob* j : live) {
    MtpDrafter& d = *j->drafter;
    d.pend_.clear();  // (none left: rows past L - 2 would belong to tokens not in the context)
    d.tok_ = argmax(d.logits_.data(), d.n_vocab_);
    std::copy(d.hid_.begin(), d.hid_.end(), d.h_.begin());
    j->out->push_back(d.tok_);
  }
  std::vector<MtpHead::Seq> batch;
  std::vector<const MtpJob*> in;
  for (int pos = 1;; ++pos) {
    batch.clear();
    in.clear();
    for (const MtpJob* j : live) {
      MtpDrafter& d = *j->drafter;
      if (pos >= j->max_n || d.kv_.n_tokens() >= d.kv_.max_tokens()) continue;
      batch.push_back({std::span<const int32_t>(&d.tok_, 1), d.h_.data(), &d.kv_, d.logits_.data(), d.hid_.data()});
      in.push_back(j);
    }
    if (batch.empty()) break;
    head->forward_batch(batch);
    ++passes;
    for (const MtpJob* j : in) {
      MtpDrafter& d = *j->drafter;
      d.tok_ = argmax(d.logits_.data(), d.n_vocab_);
      std::copy(d.hid_.begin(), d.hid_.end(), d.h_.begin());
      j->out->push_back(d.tok_);
    }
  }
  return passes;
}

std::shared_ptr<MtpHead> load_mtp_head(Model& target, const std::string& head_path) {
  std::unique_ptr<MtpHead> head = head_path.empty() ? MtpHead::load(target) : MtpHead::load(target, head_path);
  check(head != nullptr, "this model has no MTP (nextn) layers (give the head with --model-mtp FILE)");
  return head;
}

std::unique_ptr<Drafter> make_mtp_drafter(Model& target, int max_tokens, const std::string& head_path) {
  return std::make_unique<MtpDrafter>(load_mtp_head(target, head_path), max_tokens);
}

}  // namespace polykv
