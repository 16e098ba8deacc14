// The decoder forward pass, written once for every architecture in model/config.h:
//   x = embed(tokens) [* sqrt(n_embd)]
//   per layer: h = norm(x); q,k,v = h·W (+b); [q,k = headnorm(q,k)]; rope(q,k); store k,v;
//              a = attention(q, cache)·Wo; [a = norm(a)]; x += a
//              h = norm(x); m = (act(h·Wg) * (h·Wu))·Wd; [m = norm(m)]; x += m
//   logits = norm(x)·Wout [softcapped]
#include <algorithm>
#include <cmath>

#include "backend/cpu/attention.h"
#include "backend/cpu/ops.h"
#include "core/error.h"
#include "model/model.h"
#include "quant/quant.h"

namespace polykv {

Model::Model(GgufFile file, ModelConfig config)
    : file_(std::move(file)), config_(std::move(config)), weights_(bind_weights(file_, config_)) {
  const ModelConfig& c = config_;
  inv_freq_.resize(size_t(c.n_layer));
  for (int il = 0; il < c.n_layer; ++il) {
    auto& f = inv_freq_[size_t(il)];
    f.resize(size_t(c.n_rot / 2));
    for (int i = 0; i < c.n_rot / 2; ++i) {
      // float32 as transformers computes it: base^(-2i/n_rot)
      f[size_t(i)] = 1.0f / std::pow(c.layers[size_t(il)].rope_base, float(2 * i) / float(c.n_rot));
      if (!weights_.rope_inv_freq_factors.empty()) f[size_t(i)] /= weights_.rope_inv_freq_factors[size_t(i)];
    }
  }
}

std::unique_ptr<Model> Model::load(const std::string& path) {
  GgufFile f = GgufFile::open(path);
  ModelConfig c;
  try {
    c = config_from_gguf(f);
  } catch (const Error& e) {
    fail("'", path, "': ", e.what());
  }
  return std::unique_ptr<Model>(new Model(std::move(f), std::move(c)));
}

KEqualizer Model::make_k_equalizer(const KEqualizationParams& p) const {
  return KEqualizer(p, config_.n_layer, config_.n_head_kv, config_.head_dim, config_.n_rot, config_.rope_style);
}

KvShape Model::kv_shape() const {
  KvShape s{config_.n_layer, config_.n_head_kv, config_.head_dim, config_.head_dim_v, {}};
  for (const LayerConfig& lc : config_.layers) s.layer_window.push_back(lc.sliding ? config_.sliding_window : 0);
  return s;
}

size_t Model::weight_bytes_per_token() const {
  auto bytes = [](const WeightMatrix& w) { return w.row_stride * size_t(w.n_out); };
  size_t total = bytes(weights_.output);
  for (const auto& l : weights_.layers)
    total += bytes(l.wq) + bytes(l.wk) + bytes(l.wv) + bytes(l.wo) + bytes(l.w_gate) + bytes(l.w_up) + bytes(l.w_down);
  return total;
}

void Model::forward(std::span<const int32_t> tokens, KvSequence& kv, float* logits, bool all_logits, ThreadPool& pool) {
  const BatchSeq one{tokens, &kv, logits, all_logits};
  forward_batch(std::span<const BatchSeq>(&one, 1), pool);
}

void Model::forward_batch(std::span<const BatchSeq> batch, ThreadPool& pool) {
  const ModelConfig& c = config_;
  const ModelWeights& w = weights_;
  // Rows of the step: sequence s owns rows [row0[s], row0[s] + len(s)); pos[r] is row r's position.
  std::vector<int> row0(batch.size() + 1, 0), pos;
  for (size_t s = 0; s < batch.size(); ++s) {
    const BatchSeq& b = batch[s];
    const int n_s = int(b.tokens.size());
    check(b.kv != nullptr, "forward pass: a sequence without KV");
    check(n_s > 0, "forward pass needs at least one token");
    const int p0 = b.kv->n_tokens();
    check(p0 + n_s <= b.kv->max_tokens(), "context full: ", p0 + n_s, " tokens exceed the context of ",
          b.kv->max_tokens());
    for (int32_t t : b.tokens) check(t >= 0 && t < c.n_vocab, "token id ", t, " is out of range [0, ", c.n_vocab, ")");
    for (int i = 0; i < n_s; ++i) pos.push_back(p0 + i);
    row0[s + 1] = row0[s] + n_s;
  }
  const int n = row0.back();
  check(n > 0, "forward pass needs at least one token");

  const int64_t E = c.n_embd, Q = c.q_dim(), K = c.kv_dim(), V = c.v_dim(), A = int64_t(c.n_head) * c.head_dim_v;
  std::vector<float> x(size_t(n * E)), h(size_t(n * E));                // [n][n_embd]
  std::vector<float> q(size_t(n * Q)), k(size_t(n * K)), v(size_t(n * V));  // [n][heads][head_dim]
  std::vector<float> att(size_t(n * A));                                // [n][n_head][head_dim_v]
  std::vector<float> gate(size_t(n * c.n_ff)), up(size_t(n * c.n_ff));  // [n][n_ff]

  for (size_t s = 0; s < batch.size(); ++s)
    for (size_t i = 0; i < batch[s].tokens.size(); ++i) {
      const int64_t t = row0[s] + int64_t(i);
      dequantize_row_ref(w.token_embd.type,
                         static_cast<const uint8_t*>(w.token_embd.data) + size_t(batch[s].tokens[i]) * w.token_embd.row_stride,
                         x.data() + t * E, E);
      if (c.embed_scale) {
        const float sc = std::sqrt(float(E));
        for (int64_t j = 0; j < E; ++j) x[size_t(t * E + j)] *= sc;
      }
    }

  for (int il = 0; il < c.n_layer; ++il) {
    const LayerWeights& l = w.layers[size_t(il)];
    const LayerConfig& lc = c.layers[size_t(il)];
    rmsnorm(x.data(), l.attn_norm.data(), h.data(), n, int(E), c.rms_eps);
    matmul(l.wq, h.data(), q.data(), n, pool);
    matmul(l.wk, h.data(), k.data(), n, pool);
    matmul(l.wv, h.data(), v.data(), n, pool);
    for (int t = 0; t < n; ++t) {
      float* qt = q.data() + t * Q;
      float* kt = k.data() + t * K;
      if (c.qkv_bias) {
        add_inplace(qt, l.bq.data(), Q);
        add_inplace(kt, l.bk.data(), K);
        add_inplace(v.data() + t * V, l.bv.data(), V);
      }
      if (c.qk_norm) {
        rmsnorm(qt, l.q_norm.data(), qt, c.n_head, c.head_dim, c.rms_eps);
        rmsnorm(kt, l.k_norm.data(), kt, c.n_head_kv, c.head_dim, c.rms_eps);
      }
      const float* inv_freq = inv_freq_[size_t(il)].data();
      rope(qt, c.n_head, c.head_dim, c.n_rot, pos[size_t(t)], inv_freq, lc.rope_scale, c.rope_style);
      rope(kt, c.n_head_kv, c.head_dim, c.n_rot, pos[size_t(t)], inv_freq, lc.rope_scale, c.rope_style);
    }
    AttentionParams ap;
    ap.n_head = c.n_head;
    ap.scale = c.attn_scale;
    ap.softcap = c.attn_softcap;
    ap.window = lc.sliding ? c.sliding_window : 0;
    // Every sequence stores its rows first; then one attention call over all of them, which reads
    // the blocks sequences share (a common prefix) once for all their queries.
    std::vector<AttentionSeq> as(batch.size());
    for (size_t s = 0; s < batch.size(); ++s) {
      KvSequence& kv = *batch[s].kv;
      const int r0 = row0[s], n_s = row0[s + 1] - row0[s], p0 = kv.n_tokens();
      float* ks = k.data() + r0 * K;
      float* qs = q.data() + r0 * Q;
      kv.k_equalizer().equalize_keys(il, p0, ks, n_s);  // no-op unless enabled
      kv.store(il, p0, n_s, ks, v.data() + r0 * V, &pool);
      kv.k_equalizer().scale_queries(il, qs, n_s, c.n_head);
    }
    for (size_t s = 0; s < batch.size(); ++s) {
      const int r0 = row0[s];
      as[s] = {batch[s].kv->view(il), batch[s].kv->n_tokens(), row0[s + 1] - r0, q.data() + r0 * Q, att.data() + r0 * A};
    }
    attention_batch(ap, as, pool);
    matmul(l.wo, att.data(), h.data(), n, pool);
    if (c.sandwich_norm) rmsnorm(h.data(), l.post_attn_norm.data(), h.data(), n, int(E), c.rms_eps);
    add_inplace(x.data(), h.data(), n * E);

    rmsnorm(x.data(), l.ffn_norm.data(), h.data(), n, int(E), c.rms_eps);
    matmul(l.w_gate, h.data(), gate.data(), n, pool);
    matmul(l.w_up, h.data(), up.data(), n, pool);
    gated_activation(gate.data(), up.data(), int64_t(n) * c.n_ff, c.activation);
    matmul(l.w_down, gate.data(), h.data(), n, pool);
    if (c.sandwich_norm) rmsnorm(h.data(), l.post_ffn_norm.data(), h.data(), n, int(E), c.rms_eps);
    add_inplace(x.data(), h.data(), n * E);
  }
  for (size_t s = 0; s < batch.size(); ++s) batch[s].kv->commit(batch[s].kv->n_tokens() + row0[s + 1] - row0[s]);

  // Only the rows whose logits are wanted go through the output norm and the vocabulary matmul:
  // gathered into h, then written to each sequence's buffer.
  std::vector<int> out_rows;  // rows of x, in batch order
  for (size_t s = 0; s < batch.size(); ++s) {
    if (!batch[s].logits) continue;
    for (int r = batch[s].all_logits ? row0[s] : row0[s + 1] - 1; r < row0[s + 1]; ++r) out_rows.push_back(r);
  }
  if (out_rows.empty()) return;
  const int n_out = int(out_rows.size());
  std::vector<float> xo(size_t(n_out * E));
  for (int i = 0; i < n_out; ++i) std::copy_n(x.data() + out_rows[size_t(i)] * E, E, xo.data() + i * E);
  rmsnorm(xo.data(), w.output_norm.data(), h.data(), n_out, int(E), c.rms_eps);
  const bool one_buffer = batch.size() == 1;  // the common single-sequence call writes straight through
  std::vector<float> scratch(one_buffer ? 0 : size_t(n_out) * size_t(c.n_vocab));
  float* dst = one_buffer ? batch[0].logits : scratch.data();
  matmul(w.output, h.data(), dst, n_out, pool);
  if (c.final_softcap > 0) softcap(dst, int64_t(n_out) * c.n_vocab, c.final_softcap);
  if (one_buffer) return;
  for (size_t s = 0, i = 0; s < batch.size(); ++s) {
    if (!batch[s].logits) continue;
    const int n_rows = batch[s].all_logits ? row0[s + 1] - row0[s] : 1;
    std::copy_n(scratch.data() + i * size_t(c.n_vocab), size_t(n_rows) * size_t(c.n_vocab), batch[s].logits);
    i += size_t(n_rows);
  }
}

}  // namespace polykv
