#include "model/mtp_head.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"
#include "model/rope_freqs.h"
#include "quant/quant.h"

namespace polykv {
namespace {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i]; n values (the backends' rmsnorm, on the host).
void rms_host(const float* x, const float* w, float* out, int n, float eps) {
  float ss = 0;
  for (int i = 0; i < n; ++i) ss += x[i] * x[i];
  const float r = 1.0f / std::sqrt(ss / float(n) + eps);
  for (int i = 0; i < n; ++i) out[i] = x[i] * r * w[i];
}

}  // namespace

std::unique_ptr<MtpHead> MtpHead::load(Model& target) {
  if (target.config().n_nextn == 0) return nullptr;
  return std::unique_ptr<MtpHead>(new MtpHead(target, target.gguf(), nullptr));
}

std::unique_ptr<MtpHead> MtpHead::load(Model& target, const std::string& head_path) {
  const ModelConfig& c = target.config();
  auto side = std::make_unique<GgufFile>(GgufFile::open(head_path));
  const GgufFile& f = *side;
  const std::string arch = target.gguf().get_str("general.architecture");
  const std::string a = f.get_str("general.architecture", "");
  check(a == arch, "MTP head ", head_path, ": general.architecture is '", a, "', the model's is '", arch, "'");
  const uint32_t nextn = f.get_u32(a + ".nextn_predict_layers", 0);
  const uint32_t blocks = f.get_u32(a + ".block_count", 0);
  check(nextn >= 1, "MTP head ", head_path, ": ", a, ".nextn_predict_layers is ", nextn, ", not >= 1 (not an MTP head)");
  check(blocks == uint32_t(c.n_layer) + 1, "MTP head ", head_path, ": ", a, ".block_count is ", blocks,
        ", the model has ", c.n_layer, " layers (want ", c.n_layer + 1, ")");
  const uint32_t embd = f.get_u32(a + ".embedding_length", 0);
  check(embd == uint32_t(c.n_embd), "MTP head ", head_path, ": ", a, ".embedding_length is ", embd,
        ", the model's is ", c.n_embd);
  check(f.find_tensor("blk." + std::to_string(c.n_layer) + ".nextn.eh_proj.weight") != nullptr, "MTP head ",
        head_path, ": no tensor blk.", c.n_layer, ".nextn.eh_proj.weight");
  const GgufFile& ref = *side;
  try {
    return std::unique_ptr<MtpHead>(new MtpHead(target, ref, std::move(side)));
  } catch (const Error& e) {  // a missing or misshaped tensor: say which file
    fail("MTP head ", head_path, ": ", e.what());
  }
}

MtpHead::MtpHead(Model& target, const GgufFile& f, std::unique_ptr<GgufFile> side)
    : target_(target), side_(std::move(side)), layer_(target.config().n_layer), ws_(target.backend()) {
  const ModelConfig& c = target.config();
  Backend& be = target.backend();
  const bool pack = be.kind() == DeviceKind::Cpu;
  const std::string p = "blk." + std::to_string(layer_) + ".";
  // The block is a full-attention one: rope as the first full-attention main layer (not a sliding
  // one, not a Gated DeltaNet one of a hybrid).
  lc_ = c.layers.at(0);
  for (const LayerConfig& l : c.layers)
    if (!l.sliding && l.kind == LayerKind::Attention) {
      lc_ = l;
      break;
    }
  lc_.sliding = false;
  lc_.kind = LayerKind::Attention;
  lc_.kv_layer = 0;  // its own one-layer KV
  lc_.state_layer = -1;
  inv_freq_ = rope_inv_freq(lc_.rope_base, c.n_rot, target.weights().rope_inv_freq_factors, c.rope_freq_divisors);
  host_ = bind_layer(f, c, layer_, pack);
  dev_ = upload_layer(be, host_, inv_freq_, c);
  eh_proj_host_ = bind_matrix(f, p + "nextn.eh_proj.weight", 2 * int64_t(c.n_embd), c.n_embd, pack);
  eh_proj_ = be.upload_matrix(eh_proj_host_);
  enorm_ = bind_vector(f, p + "nextn.enorm.weight", c.n_embd);
  hnorm_ = bind_vector(f, p + "nextn.hnorm.weight", c.n_embd);
  head_norm_ = bind_vector(f, p + "nextn.shared_head_norm.weight", c.n_embd);
  dev_head_norm_ = be.upload_floats(head_norm_);
}

MtpHead::~MtpHead() {
  if (cat_) target_.backend().release(cat_);
}

KvShape MtpHead::kv_shape() const {
  const ModelConfig& c = target_.config();
  return KvShape{1, c.n_head_kv, c.head_dim, c.head_dim_v, {0}, RecurrentShape{}};  // one attention layer, no state
}

void MtpHead::reserve(int rows, int out_rows) {
  const ModelConfig& c = target_.config();
  ws_.reserve(c, rows, out_rows);
  if (rows <= cat_rows_) return;
  void* p = target_.backend().allocate(size_t(rows) * 2 * size_t(c.n_embd) * sizeof(float));
  if (cat_) target_.backend().release(cat_);
  cat_ = static_cast<float*>(p);
  cat_rows_ = rows;
}

void MtpHead::fill_cat_row(int i, int32_t id, const float* hidden) {
  const ModelConfig& c = target_.config();
  const int E = c.n_embd;
  check(id >= 0 && id < c.n_vocab, "token id ", id, " is out of range [0, ", c.n_vocab, ")");
  const WeightMatrix& table = target_.weights().token_embd;
  const float scale = c.embed_scale ? std::sqrt(float(E)) : 1.0f;
  emb_.resize(size_t(E));
  dequantize_row_ref(table.type, static_cast<const uint8_t*>(table.data) + size_t(id) * table.row_stride, emb_.data(), E);
  for (float& v : emb_) v *= scale;
  float* row = host_cat_.data() + size_t(i) * 2 * size_t(E);
  rms_host(emb_.data(), enorm_.data(), row, E, c.rms_eps);
  rms_host(hidden, hnorm_.data(), row + E, E, c.rms_eps);
}

void MtpHead::forward(std::span<const int32_t> next_ids, const float* hidden, KvSequence& kv, float* logits,
                      float* hidden_out, bool last_row_only) {
  const ModelConfig& c = target_.config();
  Backend& be = target_.backend();
  const int n = int(next_ids.size()), E = c.n_embd;
  check(n > 0, "MTP head: no rows");
  check(hidden != nullptr, "MTP head: no hidden states");
  const int pos0 = kv.n_tokens();
  check(pos0 + n <= kv.max_tokens(), "MTP head: context full: ", pos0 + n, " tokens exceed the context of ",
        kv.max_tokens());
  reserve(n, n);

  // The eh_proj input on the host (n rows of 2 n_embd): the embedding half, then the hidden half.
  host_cat_.resize(size_t(n) * 2 * size_t(E));
  for (int i = 0; i < n; ++i) fill_cat_row(i, next_ids[size_t(i)], hidden + size_t(i) * size_t(E));
  be.upload(cat_, host_cat_.data(), host_cat_.size() * sizeof(float));
  std::vector<int32_t> pos(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) pos[size_t(i)] = pos0 + i;
  be.upload(ws_.ids, pos.data(), pos.size() * sizeof(int32_t));

  const StepSeq step{&kv, pos0, n, 0};
  be.begin_step(std::span<const StepSeq>(&step, 1));
  be.matmul(eh_proj_, cat_, ws_.x, n);                                 // x: [n][n_embd]
  target_.issue_layer_ops(dev_, lc_, /*kv_layer=*/0, n, ws_.ids, ws_);  // y in ws_.x
  // Output rows: all n, or row n - 1 alone (y of row r0 .. n - 1 at ws_.x + r0 * E).
  const int r0 = last_row_only ? n - 1 : 0, n_out = n - r0;
  const float* y = ws_.x + size_t(r0) * size_t(E);
  if (logits) {
    be.rmsnorm(y, dev_head_norm_, ws_.h, n_out, E, c.rms_eps);
    be.matmul(target_.device_weights().output, ws_.h, ws_.logits, n_out);  // [n_out][n_vocab]
    if (c.final_softcap > 0) be.softcap(ws_.logits, int64_t(n_out) * c.n_vocab, c.final_softcap);
  }
  kv.commit(pos0 + n);
  if (hidden_out) be.download(hidden_out, y, size_t(n_out) * size_t(E) * sizeof(float));
  if (logits) be.download(logits, ws_.logits, size_t(n_out) * size_t(c.n_vocab) * sizeof(float));
  if (!hidden_out && !logits) be.synchronize();
}

void MtpHead::forward_batch(std::span<const Seq> seqs) {
  forward_batch(seqs, target_.backend().one_kv_pool_per_step());
}

void MtpHead::forward_batch(std::span<const Seq> seqs, bool split_by_pool) {
  if (!split_by_pool || seqs.size() < 2) return forward_pass(seqs);
  // Groups by pool (KvSequence::block_store(); a private cache has none and is a group of its own).
  std::vector<bool> taken(seqs.size(), false);
  std::vector<Seq> group;
  for (size_t i = 0; i < seqs.size(); ++i) {
    if (taken[i]) continue;
    const KvBlockStore* store = seqs[i].kv != nullptr ? seqs[i].kv->block_store() : nullptr;
    group.clear();
    for (size_t j = i; j < seqs.size(); ++j) {
      if (taken[j]) continue;
      const KvBlockStore* sj = seqs[j].kv != nullptr ? seqs[j].kv->block_store() : nullptr;
      if (j == i || (store != nullptr && sj == store)) {
        taken[j] = true;
        group.push_back(seqs[j]);
      }
    }
    forward_pass(group);
  }
}

void MtpHead::forward_pass(std::span<const Seq> seqs) {
  const ModelConfig& c = target_.config();
  Backend& be = target_.backend();
  const int E = c.n_embd;
  // Sequence s owns rows [steps[s].row0, + n) at positions pos0 ...; out_seq: the sequences with outputs.
  std::vector<StepSeq> steps;
  std::vector<int32_t> ids;  // positions [n], then the output rows (each sequence's last) [n_out]
  std::vector<int32_t> out_rows;
  std::vector<size_t> out_seq;
  int n = 0;
  for (size_t s = 0; s < seqs.size(); ++s) {
    const Seq& q = seqs[s];
    const int n_s = int(q.next_ids.size());
    check(n_s > 0, "MTP head: a sequence without rows");
    check(q.hidden != nullptr && q.kv != nullptr, "MTP head: a sequence without hidden states or KV");
    for (const StepSeq& st : steps) check(st.kv != q.kv, "MTP head: a KV appears twice in one batch");
    const int p0 = q.kv->n_tokens();
    check(p0 + n_s <= q.kv->max_tokens(), "MTP head: context full: ", p0 + n_s, " tokens exceed the context of ",
          q.kv->max_tokens());
    steps.push_back({q.kv, p0, n_s, n});
    for (int i = 0; i < n_s; ++i) ids.push_back(p0 + i);
    n += n_s;
    if (q.logits || q.hidden_out) {
      out_rows.push_back(n - 1);
      out_seq.push_back(s);
    }
  }
  if (n == 0) return;
  reserve(n, std::max(1, int(out_rows.size())));  // logits of the last rows only
  host_cat_.resize(size_t(n) * 2 * size_t(E));
  for (size_t s = 0; s < seqs.size(); ++s)
    for (int i = 0; i < steps[s].n; ++i)
      fill_cat_row(steps[s].row0 + i, seqs[s].next_ids[size_t(i)], seqs[s].hidden + size_t(i) * size_t(E));
  be.upload(cat_, host_cat_.data(), host_cat_.size() * sizeof(float));
  const int n_out = int(out_rows.size());
  ids.insert(ids.end(), out_rows.begin(), out_rows.end());  // ws_.ids holds 4 n
  be.upload(ws_.ids, ids.data(), ids.size() * sizeof(int32_t));

  be.begin_step(steps);
  be.matmul(eh_proj_, cat_, ws_.x, n);
  target_.issue_layer_ops(dev_, lc_, /*kv_layer=*/0, n, ws_.ids, ws_);  // y in ws_.x
  bool any_logits = false;
  for (size_t s : out_seq) any_logits = any_logits || seqs[s].logits;
  if (n_out > 0) {
    be.gather_rows(ws_.x, ws_.ids + n, n_out, E, ws_.hidden);  // y of the output rows: [n_out][n_embd]
    if (any_logits) {
      be.rmsnorm(ws_.hidden, dev_head_norm_, ws_.h, n_out, E, c.rms_eps);
      be.matmul(target_.device_weights().output, ws_.h, ws_.logits, n_out);  // [n_out][n_vocab]
      if (c.final_softcap > 0) be.softcap(ws_.logits, int64_t(n_out) * c.n_vocab, c.final_softcap);
    }
  }
  for (const StepSeq& st : steps) st.kv->commit(st.pos0 + st.n);
  bool downloaded = false;
  for (size_t o = 0; o < out_seq.size(); ++o) {
    const Seq& q = seqs[out_seq[o]];
    if (q.hidden_out) be.download(q.hidden_out, ws_.hidden + o * size_t(E), size_t(E) * sizeof(float));
    if (q.logits) be.download(q.logits, ws_.logits + o * size_t(c.n_vocab), size_t(c.n_vocab) * sizeof(float));
    downloaded = true;
  }
  if (!downloaded) be.synchronize();
}

}  // namespace polykv
