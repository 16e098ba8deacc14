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

void MtpDrafter::draft(std::span<const int32_t> context, int max_n, std::vector<int32_t>& out, DraftProbs* probs) {
  (void)probs;  // greedy: q is one-hot
  const size_t E = size_t(n_embd_);
  const int L = int(context.size());
  // Drop chained draft rows (and any row the new hidden states recompute).
  if (kv_.n_tokens() > pend_pos0_) kv_.truncate(pend_pos0_);
  const int rows = std::min(int(pend_.size() / E), L - 1 - pend_pos0_);
  // The head must reach row L - 2 (hidden h_{L-2}, token L - 1) from dense real rows before it.
  if (kv_.n_tokens() != pend_pos0_ || rows <= 0 || pend_pos0_ + rows != L - 1) {
    pend_.clear();
    return;  // nothing to draft from (a gap in the hidden states): an ordinary step follows
  }
  for (int r0 = 0; r0 < rows; r0 += kChunk) {
    const int n = std::min(kChunk, rows - r0);
    const bool last = r0 + n == rows;
    hid_.resize(size_t(n) * E);
    logits_.resize(last ? size_t(n) * size_t(n_vocab_) : 0);
    head_->forward(context.subspan(size_t(pend_pos0_ + r0 + 1), size_t(n)), pend_.data() + size_t(r0) * E, kv_,
                   last ? logits_.data() : nullptr, last ? hid_.data() : nullptr);
    if (!last) continue;
    // Draft 1 from the last real row; then chain: draft j+1 from (draft j, y_j).
    const size_t lr = size_t(n - 1);
    int32_t d = argmax(logits_.data() + lr * size_t(n_vocab_), n_vocab_);
    std::vector<float> h(hid_.begin() + std::ptrdiff_t(lr * E), hid_.begin() + std::ptrdiff_t((lr + 1) * E));
    out.push_back(d);
    pend_.clear();
    pend_pos0_ = kv_.n_tokens();  // real rows end here; the chain's rows go above
    for (int j = 1; j < max_n && kv_.n_tokens() < kv_.max_tokens(); ++j) {
      logits_.resize(size_t(n_vocab_));
      head_->forward(std::span<const int32_t>(&d, 1), h.data(), kv_, logits_.data(), hid_.data());
      d = argmax(logits_.data(), n_vocab_);
      std::copy(hid_.begin(), hid_.begin() + std::ptrdiff_t(E), h.begin());
      out.push_back(d);
    }
  }
}

std::unique_ptr<Drafter> make_mtp_drafter(Model& target, int max_tokens, const std::string& head_path) {
  std::unique_ptr<MtpHead> head = head_path.empty() ? MtpHead::load(target) : MtpHead::load(target, head_path);
  check(head != nullptr, "this model has no MTP (nextn) layers (give the head with --model-mtp FILE)");
  return std::make_unique<MtpDrafter>(std::move(head), max_tokens);
}

}  // namespace polykv
