#include "engine/spec/draft_model_drafter.h"

#include <algorithm>

#include "core/error.h"
#include "core/fp16.h"
#include "engine/sequence_kv.h"
#include "kv/kv_cache.h"

namespace polykv {

void check_draft_vocab(const Model& target, const Model& draft) {
  const int nt = target.config().n_vocab, nd = draft.config().n_vocab;
  check(nt == nd, "--model-draft: the draft model's vocabulary has ", nd, " tokens, the target's ", nt,
        "; a draft model must share the target's vocabulary");
  const char* key = "tokenizer.ggml.tokens";
  check(target.gguf().has(key) && draft.gguf().has(key), "--model-draft: both models need ", key,
        " to compare their vocabularies");
  const auto a = target.gguf().get_str_array(key), b = draft.gguf().get_str_array(key);
  check(a.size() == b.size(), "--model-draft: the vocabularies differ in size (", a.size(), " vs ", b.size(), ")");
  for (size_t i = 0; i < a.size(); ++i)
    check(a[i] == b[i], "--model-draft: the vocabularies differ at token ", i, " (target '", a[i].substr(0, 40),
          "', draft '", b[i].substr(0, 40), "'); a draft model must share the target's tokenizer");
}

DraftModelDrafter::DraftModelDrafter(Model& draft, const DraftModelOptions& o) : model_(draft), opts_(o) {
  SequenceKvOptions kvo;
  kvo.k_type = o.k_type;
  kvo.v_type = o.v_type;
  kvo.max_tokens = o.max_tokens;
  kvo.rollback_tokens = 17;  // more than the longest draft (16) plus one
  kv_ = make_sequence_kv(model_, kvo);
  logits_.resize(size_t(model_.config().n_vocab));
}

void DraftModelDrafter::feed(std::span<const int32_t> tokens, bool want_logits) {
  const size_t chunk = size_t(std::max(1, opts_.prefill_chunk));
  for (size_t i = 0; i < tokens.size(); i += chunk) {
    const size_t n = std::min(chunk, tokens.size() - i);
    const bool last = i + n == tokens.size();
    model_.forward(tokens.subspan(i, n), *kv_, want_logits && last ? logits_.data() : nullptr, false);
  }
  kv_tokens_.insert(kv_tokens_.end(), tokens.begin(), tokens.end());
}

void DraftModelDrafter::rollback(std::span<const int32_t> context, size_t limit) {
  size_t keep = 0;
  const size_t n = std::min({kv_tokens_.size(), context.size(), limit});
  while (keep < n && kv_tokens_[keep] == context[keep]) ++keep;
  if (keep < kv_tokens_.size()) {
    truncate_sequence_kv(*kv_, int(keep));
    kv_tokens_.resize(keep);
  }
}

void DraftModelDrafter::prefill(std::span<const int32_t> prompt) {
  if (prompt.size() < 2) return;
  rollback(prompt, prompt.size() - 1);
  feed(prompt.subspan(kv_tokens_.size(), prompt.size() - 1 - kv_tokens_.size()), false);
}

void DraftModelDrafter::draft(std::span<const int32_t> context, int max_n, std::vector<int32_t>& out,
                              DraftProbs* probs) {
  (void)probs;  // greedy drafts: q is one-hot
  const DraftJob job{this, context, max_n, &out};
  draft_many(std::span(&job, 1));
}

int DraftModelDrafter::draft_many(std::span<const DraftJob> jobs) {
  // A job still taking part: its drafter, and max_n after the room check.
  struct Live {
    const DraftJob* job;
    int max_n;
    size_t fed = 0;  // catch-up tokens fed so far
  };
  std::vector<Live> live;
  Model* model = nullptr;
  for (const DraftJob& j : jobs) {
    DraftModelDrafter& d = *j.drafter;
    check(model == nullptr || model == &d.model_, "draft_many: the drafters must share one draft model");
    model = &d.model_;
    if (j.context.empty() || j.max_n <= 0) continue;
    // Room for the context and max_n - 1 fed drafts.
    const int max_n = std::min(j.max_n, d.kv_->max_tokens() - int(j.context.size()) + 1);
    if (max_n <= 0) continue;
    for (const Live& l : live) check(l.job->drafter != &d, "draft_many: a drafter appears twice");
    // Everything up to and including the last context token is fed, so that logits_ predicts the next one.
    d.rollback(j.context, j.context.size() - 1);
    live.push_back({&j, max_n});
  }
  if (live.empty()) return 0;
  const int32_t n_vocab = model->config().n_vocab;
  int n_forward = 0;
  std::vector<Model::BatchSeq> batch;
  // Catch-up: rounds of up to prefill_chunk tokens per job; a job's last chunk gives its logits.
  for (;;) {
    batch.clear();
    for (Live& l : live) {
      DraftModelDrafter& d = *l.job->drafter;
      const std::span<const int32_t> lack = l.job->context.subspan(d.kv_tokens_.size() + l.fed);
      if (lack.empty()) continue;
      const size_t n = std::min(size_t(std::max(1, d.opts_.prefill_chunk)), lack.size());
      const bool last = n == lack.size();
      batch.push_back({lack.first(n), d.kv_.get(), last ? d.logits_.data() : nullptr, false});
      l.fed += n;
    }
    if (batch.empty()) break;
    model->forward_batch(batch);
    ++n_forward;
  }
  for (Live& l : live) {
    DraftModelDrafter& d = *l.job->drafter;
    d.last_catch_up_ = int(l.fed) + d.copied_;
    d.copied_ = 0;
    const std::span<const int32_t> ctx = l.job->context;
    d.kv_tokens_.insert(d.kv_tokens_.end(), ctx.begin() + std::ptrdiff_t(d.kv_tokens_.size()), ctx.end());
  }
  // Draft position i: every live job takes its greedy token; those wanting more feed it, together.
  std::vector<int32_t> fed(live.size());  // [live]: the token fed this round (batch spans point here)
  for (int i = 0;; ++i) {
    batch.clear();
    for (size_t li = 0; li < live.size(); ++li) {
      Live& l = live[li];
      if (i >= l.max_n) continue;
      DraftModelDrafter& d = *l.job->drafter;
      const int32_t t = int32_t(std::max_element(d.logits_.begin(), d.logits_.begin() + n_vocab) - d.logits_.begin());
      l.job->out->push_back(t);
      if (i + 1 < l.max_n) {
        fed[li] = t;
        d.kv_tokens_.push_back(t);
        batch.push_back({std::span<const int32_t>(&fed[li], 1), d.kv_.get(), d.logits_.data(), false});
      }
    }
    if (batch.empty()) break;
    model->forward_batch(batch);
    ++n_forward;
  }
  return n_forward;
}

int DraftModelDrafter::copy_prefix_from(const DraftModelDrafter& src, std::span<const int32_t> context, size_t limit) {
  if (!kv_tokens_.empty() || &src.model_ != &model_) return 0;
  const auto* from = dynamic_cast<const KvCache*>(src.kv_.get());
  auto* to = dynamic_cast<KvCache*>(kv_.get());
  if (!from || !to || from->k_type() != KvType::F16 || from->v_type() != KvType::F16 || to->k_type() != KvType::F16 ||
      to->v_type() != KvType::F16)
    return 0;
  const KvShape& shape = from->shape();
  if (shape.recurrent.n_layer > 0) return 0;
  for (int w : shape.layer_window)
    if (w != 0) return 0;
  size_t n = 0;
  const size_t m = std::min({src.kv_tokens_.size(), context.size(), limit, size_t(to->max_tokens())});
  while (n < m && src.kv_tokens_[n] == context[n]) ++n;
  if (n == 0) return 0;
  const int hk = shape.n_head_kv, dk = shape.head_dim, dv = shape.head_dim_v;
  constexpr int kChunk = 256;  // positions per store()
  std::vector<float> k(size_t(kChunk) * size_t(hk * dk)), v(size_t(kChunk) * size_t(hk * dv));  // [chunk][hk * d]
  auto decode = [](const uint8_t* row, int d, float* out) {
    const auto* h = reinterpret_cast<const uint16_t*>(row);
    for (int i = 0; i < d; ++i) out[i] = fp16_to_f32(h[i]);
  };
  for (int layer = 0; layer < shape.n_layer; ++layer) {
    const KvLayerView view = from->view(layer);
    for (int p0 = 0; p0 < int(n); p0 += kChunk) {
      const int c = std::min(kChunk, int(n) - p0);
      for (int p = 0; p < c; ++p)
        for (int g = 0; g < hk; ++g) {
          decode(view.k_row(p0 + p, g), dk, &k[(size_t(p) * size_t(hk) + size_t(g)) * size_t(dk)]);
          decode(view.v_row(p0 + p, g), dv, &v[(size_t(p) * size_t(hk) + size_t(g)) * size_t(dv)]);
        }
      to->store(layer, p0, c, k.data(), v.data());
    }
  }
  to->commit(int(n));
  kv_tokens_.assign(context.begin(), context.begin() + std::ptrdiff_t(n));
  copied_ = int(n);
  return int(n);
}

void DraftModelDrafter::accept(std::span<const int32_t> context, int n_accepted) {
  (void)n_accepted;
  // Keep what is still the sequence (the accepted drafts); the next draft() feeds the rest.
  rollback(context, context.size());
}

}  // namespace polykv
