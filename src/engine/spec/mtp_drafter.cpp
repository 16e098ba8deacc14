#include "engine/spec/mtp_drafter.h"

#include <algorithm>

#include "core/error.h"

namespace polykv {
namespace {

int32_t argmax(const float* v, int n) {  // first maximum
  return int32_t(std::max_element(v, v + n) - v);
}

}  // namespace

MtpDrafter::MtpDrafter(std::unique_ptr<MtpHead> head, int max_tokens)
    : head_(std::move(head)),
      kv_(head_->kv_shape(), KvType::F16, KvType::F16, max_tokens + kChain, 256,
          head_->target().backend().kv_memory()),
      n_embd_(head_->target().config().n_embd),
      n_vocab_(head_->target().config().n_vocab) {}

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

bool MtpDrafter::catch_up(std::span<const int32_t> context, int last, bool want_last) {
  const size_t E = size_t(n_embd_);
  // Drop chained draft rows (and any row the waiting hidden states recompute).
  if (kv_.n_tokens() > pend_pos0_) kv_.truncate(pend_pos0_);
  const int rows = last - pend_pos0_ + 1;
  if (kv_.n_tokens() != pend_pos0_ || rows <= 0 || size_t(rows) * E > pend_.size() || last + 1 >= int(context.size()))
    return false;
  for (int r0 = 0; r0 < rows; r0 += kChunk) {
    const int n = std::min(kChunk, rows - r0);
    const bool out = want_last && r0 + n == rows;
    if (out) {
      logits_.resize(size_t(n_vocab_));
      hid_.resize(E);
    }
    head_->forward(context.subspan(size_t(pend_pos0_ + r0 + 1), size_t(n)), pend_.data() + size_t(r0) * E, kv_,
                   out ? logits_.data() : nullptr, out ? hid_.data() : nullptr, /*last_row_only=*/true);
  }
  pend_.erase(pend_.begin(), pend_.begin() + std::ptrdiff_t(size_t(rows) * E));
  pend_pos0_ += rows;  // == kv_.n_tokens(): the real rows end here
  return true;
}

void MtpDrafter::prefill(std::span<const int32_t> context) { (void)catch_up(context, int(context.size()) - 3, false); }

void MtpDrafter::draft(std::span<const int32_t> context, int max_n, std::vector<int32_t>& out, DraftProbs* probs) {
  (void)probs;  // greedy: q is one-hot
  const size_t E = size_t(n_embd_);
  // The head must reach row L - 2 (hidden h_{L-2}, token L - 1) from dense real rows before it.
  if (!catch_up(context, int(context.size()) - 2, true)) {
    pend_.clear();
    return;  // nothing to draft from (a gap in the hidden states): an ordinary step follows
  }
  pend_.clear();  // (none left: rows past L - 2 would belong to tokens not in the context)
  // Draft 1 from the last real row; then chain: draft j+1 from (draft j, y_j), rows above pend_pos0_.
  int32_t d = argmax(logits_.data(), n_vocab_);
  std::vector<float> h(hid_.begin(), hid_.begin() + std::ptrdiff_t(E));
  out.push_back(d);
  for (int j = 1; j < max_n && kv_.n_tokens() < kv_.max_tokens(); ++j) {
    head_->forward(std::span<const int32_t>(&d, 1), h.data(), kv_, logits_.data(), hid_.data());
    d = argmax(logits_.data(), n_vocab_);
    std::copy(hid_.begin(), hid_.begin() + std::ptrdiff_t(E), h.begin());
    out.push_back(d);
  }
}

std::unique_ptr<Drafter> make_mtp_drafter(Model& target, int max_tokens, const std::string& head_path) {
  std::unique_ptr<MtpHead> head = head_path.empty() ? MtpHead::load(target) : MtpHead::load(target, head_path);
  check(head != nullptr, "this model has no MTP (nextn) layers (give the head with --model-mtp FILE)");
  return std::make_unique<MtpDrafter>(std::move(head), max_tokens);
}

}  // namespace polykv
