// The decoder forward pass, written once for every architecture in model/config.h:
//   x = embed(tokens) [* sqrt(n_embd)]
//   per layer: h = norm(x); q,k,v = h·W (+b); [q,k = headnorm(q,k)]; rope(q,k); store k,v;
//              a = attention(q, cache)·Wo; [a = norm(a)]; x += a
//              h = norm(x); m = (act(h·Wg) * (h·Wu))·Wd; [m = norm(m)]; x += m
//   logits = norm(x)·Wout [softcapped]
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "model/model.h"

namespace polykv {

Model::Model(GgufFile file, ModelConfig config, Backend& backend)
    : backend_(backend),
      file_(std::move(file)),
      config_(std::move(config)),
      weights_(bind_weights(file_, config_, /*pack_for_cpu=*/backend.kind() == DeviceKind::Cpu)),
      ws_(backend) {
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
  dev_ = upload_weights(backend_, weights_, inv_freq_);
}

std::unique_ptr<Model> Model::load(const std::string& path, Backend& backend) {
  GgufFile f = GgufFile::open(path);
  ModelConfig c;
  try {
    c = config_from_gguf(f);
  } catch (const Error& e) {
    fail("'", path, "': ", e.what());
  }
  return std::unique_ptr<Model>(new Model(std::move(f), std::move(c), backend));
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

void Model::forward(std::span<const int32_t> tokens, KvSequence& kv, float* logits, bool all_logits) {
  const BatchSeq one{tokens, &kv, logits, all_logits};
  forward_batch(std::span<const BatchSeq>(&one, 1));
}

void Model::forward_batch(std::span<const BatchSeq> batch) {
  // One call at a time: ws_ holds this call's activations (see model.h).
  check(!busy_.exchange(true), "Model::forward_batch: another call on this model is running; a model serves one "
        "forward pass at a time");
  struct Release {
    std::atomic<bool>& b;
    ~Release() { b.store(false); }
  } release{busy_};

  const ModelConfig& c = config_;
  Backend& be = backend_;
  // Rows of the step: sequence s owns rows [row0[s], row0[s] + len(s)) at positions pos0, pos0 + 1, ...
  std::vector<StepSeq> steps(batch.size());
  int n = 0;
  for (size_t s = 0; s < batch.size(); ++s) {
    const BatchSeq& b = batch[s];
    const int n_s = int(b.tokens.size());
    check(b.kv != nullptr, "forward pass: a sequence without KV");
    check(n_s > 0, "forward pass needs at least one token");
    const int p0 = b.kv->n_tokens();
    check(p0 + n_s <= b.kv->max_tokens(), "context full: ", p0 + n_s, " tokens exceed the context of ",
          b.kv->max_tokens());
    for (int32_t t : b.tokens) check(t >= 0 && t < c.n_vocab, "token id ", t, " is out of range [0, ", c.n_vocab, ")");
    steps[s] = {b.kv, p0, n_s, n};
    n += n_s;
  }
  check(n > 0, "forward pass needs at least one token");
  // Only the rows whose logits are wanted go through the output norm and the vocabulary matmul.
  std::vector<int32_t> out_rows;  // rows of x, in batch order
  for (size_t s = 0; s < batch.size(); ++s) {
    if (!batch[s].logits) continue;
    const int end = steps[s].row0 + steps[s].n;
    for (int r = batch[s].all_logits ? steps[s].row0 : end - 1; r < end; ++r) out_rows.push_back(r);
  }
  const int n_out = int(out_rows.size());
  // The single-sequence call on a host-memory backend writes the logits straight into the caller's
  // buffer (as large as a prompt's all-logits); otherwise they go through the workspace.
  const bool direct_logits = batch.size() == 1 && be.kind() == DeviceKind::Cpu;
  ws_.reserve(c, n, direct_logits ? 0 : n_out);

  // Tokens, positions and the logit rows reach the backend in one upload: ids = [tokens | pos | out_rows].
  std::vector<int32_t> ids;
  ids.reserve(size_t(2 * n + n_out));
  for (const BatchSeq& b : batch) ids.insert(ids.end(), b.tokens.begin(), b.tokens.end());
  for (const StepSeq& st : steps)
    for (int i = 0; i < st.n; ++i) ids.push_back(st.pos0 + i);
  ids.insert(ids.end(), out_rows.begin(), out_rows.end());
  be.upload(ws_.ids, ids.data(), ids.size() * sizeof(int32_t));
  const int32_t* tokens = ws_.ids;
  const int32_t* pos = ws_.ids + n;
  const int32_t* gather = ws_.ids + 2 * n;

  be.begin_step(steps);
  // What the ops below depend on besides the uploaded ids and the KV contents: a backend that records
  // steps (CUDA graphs) replays the ops of an equal key instead of receiving them again.
  uint64_t key = 1469598103934665603ull;  // FNV-1a over the step's shape
  auto mix = [&key](uint64_t v) { key = (key ^ v) * 1099511628211ull; };
  mix(uint64_t(n));
  mix(uint64_t(n_out));
  mix(direct_logits ? uint64_t(reinterpret_cast<uintptr_t>(batch[0].logits)) : 0);
  mix(uint64_t(reinterpret_cast<uintptr_t>(ws_.x)));
  mix(uint64_t(reinterpret_cast<uintptr_t>(ws_.logits)));
  for (size_t s = 0; s < batch.size(); ++s) mix((uint64_t(steps[s].n) << 2) | (batch[s].logits ? 2u : 0u) | (batch[s].all_logits ? 1u : 0u));
  if (!be.replay_step(key)) {
    issue_step_ops(n, n_out, tokens, pos, gather, direct_logits ? batch[0].logits : ws_.logits);
    be.end_step_ops();
  }
  for (const StepSeq& st : steps) st.kv->commit(st.pos0 + st.n);
  if (n_out == 0) {
    be.synchronize();  // the KV writes are done before the caller reads or reuses the sequences
    return;
  }
  if (direct_logits) return;
  for (size_t s = 0, i = 0; s < batch.size(); ++s) {
    if (!batch[s].logits) continue;
    const size_t n_rows = batch[s].all_logits ? size_t(steps[s].n) : 1;
    be.download(batch[s].logits, ws_.logits + i * size_t(c.n_vocab), n_rows * size_t(c.n_vocab) * sizeof(float));
    i += n_rows;
  }
}

void Model::issue_step_ops(int n, int n_out, const int32_t* tokens, const int32_t* pos, const int32_t* gather,
                           float* logits) {
  const ModelConfig& c = config_;
  const DeviceWeights& w = dev_;
  Backend& be = backend_;
  const int E = c.n_embd, Q = int(c.q_dim()), K = int(c.kv_dim()), V = int(c.v_dim());
  float *x = ws_.x, *h = ws_.h, *q = ws_.q, *k = ws_.k, *v = ws_.v, *att = ws_.att, *gate = ws_.gate, *up = ws_.up;
  be.embed(w.token_embd, tokens, n, c.embed_scale ? std::sqrt(float(E)) : 1.0f, x);

  for (int il = 0; il < c.n_layer; ++il) {
    const DeviceLayerWeights& l = w.layers[size_t(il)];
    const LayerConfig& lc = c.layers[size_t(il)];
    // h = attn_norm(x): for il > 0 the previous layer's last add_rmsnorm wrote it.
    if (il == 0) be.rmsnorm(x, l.attn_norm, h, n, E, c.rms_eps);
    const Backend::MatmulOut qkv[] = {{&l.wq, q}, {&l.wk, k}, {&l.wv, v}};
    be.matmul_multi(qkv, h, n);
    if (c.qkv_bias) {
      be.add_bias(q, l.bq, n, Q);
      be.add_bias(k, l.bk, n, K);
      be.add_bias(v, l.bv, n, V);
    }
    if (c.qk_norm) {  // per head: rows of head_dim
      be.rmsnorm(q, l.q_norm, q, n * c.n_head, c.head_dim, c.rms_eps);
      be.rmsnorm(k, l.k_norm, k, n * c.n_head_kv, c.head_dim, c.rms_eps);
    }
    be.rope_qk(q, c.n_head, k, c.n_head_kv, n, c.head_dim, c.n_rot, pos, l.rope_inv_freq, lc.rope_scale,
               c.rope_style);
    AttentionParams ap;
    ap.n_head = c.n_head;
    ap.scale = c.attn_scale;
    ap.softcap = c.attn_softcap;
    ap.window = lc.sliding ? c.sliding_window : 0;
    // Every sequence stores its rows first; then one attention call over all of them, which reads
    // the blocks sequences share (a common prefix) once for all their queries.
    be.store_kv(il, k, v);
    be.attention(il, ap, q, att);
    be.matmul(l.wo, att, h, n);
    if (c.sandwich_norm) be.rmsnorm(h, l.post_attn_norm, h, n, E, c.rms_eps);
    be.add_rmsnorm(x, h, l.ffn_norm, h, n, E, c.rms_eps);  // x += h; h = ffn_norm(x)
    const Backend::MatmulOut gate_up[] = {{&l.w_gate, gate}, {&l.w_up, up}};
    be.matmul_multi(gate_up, h, n);
    be.gated_activation(gate, up, int64_t(n) * c.n_ff, c.activation);
    be.matmul(l.w_down, gate, h, n);
    if (c.sandwich_norm) be.rmsnorm(h, l.post_ffn_norm, h, n, E, c.rms_eps);
    if (il + 1 < c.n_layer)
      be.add_rmsnorm(x, h, w.layers[size_t(il) + 1].attn_norm, h, n, E, c.rms_eps);  // x += h; h = next attn_norm(x)
    else
      be.add(x, h, int64_t(n) * E);
  }
  if (n_out == 0) return;
  // The wanted rows of x, gathered into h, normed in place, then the vocabulary matmul.
  be.gather_rows(x, gather, n_out, E, h);
  be.rmsnorm(h, w.output_norm, h, n_out, E, c.rms_eps);
  be.matmul(w.output, h, logits, n_out);  // [n_out][n_vocab]
  if (c.final_softcap > 0) be.softcap(logits, int64_t(n_out) * c.n_vocab, c.final_softcap);
}

}  // namespace polykv
