// The decoder forward pass, written once for every architecture in model/config.h:
//   x = embed(tokens) [* sqrt(n_embd)]
//   per layer: h = norm(x); q,k,v = h·W (+b); [q,k = headnorm(q,k)]; rope(q,k); store k,v;
//              a = attention(q, cache)·Wo; [a = norm(a)]; x += a
//              h = norm(x); m = (act(h·Wg) * (h·Wu))·Wd; [m = norm(m)]; x += m
//   logits = norm(x)·Wout [softcapped]
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

void Model::forward(std::span<const int32_t> tokens, KvCache& kv, float* logits, bool all_logits, ThreadPool& pool) {
  const ModelConfig& c = config_;
  const ModelWeights& w = weights_;
  const int n = int(tokens.size());
  const int pos0 = kv.n_tokens();
  check(n > 0, "forward pass needs at least one token");
  check(pos0 + n <= kv.max_tokens(), "context full: ", pos0 + n, " tokens exceed the context of ", kv.max_tokens());
  for (int32_t t : tokens) check(t >= 0 && t < c.n_vocab, "token id ", t, " is out of range [0, ", c.n_vocab, ")");

  const int64_t E = c.n_embd, Q = c.q_dim(), K = c.kv_dim(), V = c.v_dim(), A = int64_t(c.n_head) * c.head_dim_v;
  std::vector<float> x(size_t(n * E)), h(size_t(n * E));                // [n][n_embd]
  std::vector<float> q(size_t(n * Q)), k(size_t(n * K)), v(size_t(n * V));  // [n][heads][head_dim]
  std::vector<float> att(size_t(n * A));                                // [n][n_head][head_dim_v]
  std::vector<float> gate(size_t(n * c.n_ff)), up(size_t(n * c.n_ff));  // [n][n_ff]

  for (int t = 0; t < n; ++t) {
    dequantize_row_ref(w.token_embd.type,
                       static_cast<const uint8_t*>(w.token_embd.data) + size_t(tokens[t]) * w.token_embd.row_stride,
                       x.data() + t * E, E);
    if (c.embed_scale) {
      const float s = std::sqrt(float(E));
      for (int64_t i = 0; i < E; ++i) x[size_t(t * E + i)] *= s;
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
      rope(qt, c.n_head, c.head_dim, c.n_rot, pos0 + t, inv_freq, lc.rope_scale, c.rope_style);
      rope(kt, c.n_head_kv, c.head_dim, c.n_rot, pos0 + t, inv_freq, lc.rope_scale, c.rope_style);
    }
    kv.k_equalizer().equalize_keys(il, pos0, k.data(), n);  // no-op unless enabled
    kv.store(il, pos0, n, k.data(), v.data(), &pool);
    kv.k_equalizer().scale_queries(il, q.data(), n, c.n_head);
    AttentionParams ap;
    ap.n_head = c.n_head;
    ap.scale = c.attn_scale;
    ap.softcap = c.attn_softcap;
    ap.window = lc.sliding ? c.sliding_window : 0;
    attention(ap, kv.view(il), pos0, n, q.data(), att.data(), pool);
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
  kv.commit(pos0 + n);

  // Only the rows whose logits are wanted go through the output norm and the vocabulary matmul.
  const int first = all_logits ? 0 : n - 1, n_out = n - first;
  rmsnorm(x.data() + first * E, w.output_norm.data(), h.data(), n_out, int(E), c.rms_eps);
  matmul(w.output, h.data(), logits, n_out, pool);
  if (c.final_softcap > 0) softcap(logits, int64_t(n_out) * c.n_vocab, c.final_softcap);
}

}  // namespace polykv
