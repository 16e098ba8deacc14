// The decoder forward pass, written once for every architecture in model/config.h:
//   x = embed(tokens) [* sqrt(n_embd)]
//   per layer: h = norm(x); q,k,v = h·W (+b); [q,k = headnorm(q,k)]; rope(q,k); store k,v;
//              a = attention(q, cache)·Wo; [a = norm(a)]; x += a
//              h = norm(x); m = (act(h·Wg) * (h·Wu))·Wd; [m = norm(m)]; x += m
//   logits = norm(x)·Wout [softcapped]
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "core/error.h"
#include "model/gated_delta_net.h"
#include "model/model.h"
#include "model/rope_freqs.h"

namespace polykv {

Model::Model(GgufFile file, ModelConfig config, Backend& backend)
    : backend_(backend),
      file_(std::move(file)),
      config_(std::move(config)),
      weights_(bind_weights(file_, config_, /*pack_for_cpu=*/backend.kind() == DeviceKind::Cpu)),
      ws_(backend),
      hws_(backend),
      moe_ws_(backend) {
  const ModelConfig& c = config_;
  inv_freq_.resize(size_t(c.n_layer));
  for (int il = 0; il < c.n_layer; ++il)
    inv_freq_[size_t(il)] =
        rope_inv_freq(c.layers[size_t(il)].rope_base, c.n_rot, weights_.rope_inv_freq_factors, c.rope_freq_divisors);
  dev_ = upload_weights(backend_, weights_, inv_freq_, c);
}

Model::~Model() {
  // Never throws: a copy still in flight lands before its page-locked slot is released.
  try {
    drop_pending_argmax();
  } catch (...) {
  }
  if (argmax_host_) backend_.release_host(argmax_host_);
}

void Model::drop_pending_argmax() {
  const std::vector<PendingArgmax> pending = std::move(pending_argmax_);
  pending_argmax_.clear();
  for (const PendingArgmax& p : pending) backend_.wait_download(p.ticket);
}

bool Model::finish_argmax() {
  if (pending_argmax_.empty()) return false;
  const PendingArgmax p = pending_argmax_.front();
  pending_argmax_.erase(pending_argmax_.begin());
  backend_.wait_download(p.ticket);
  *p.dst = argmax_host_[p.slot];
  return true;
}

std::unique_ptr<Model> Model::load(const std::string& path, Backend& backend, const RopeOverride& rope) {
  GgufFile f = GgufFile::open(path);
  ModelConfig c;
  try {
    c = config_from_gguf(f, rope);
    check_backend_runs(c, backend);
  } catch (const Error& e) {
    fail("'", path, "': ", e.what());
  }
  return std::unique_ptr<Model>(new Model(std::move(f), std::move(c), backend));
}

KEqualizer Model::make_k_equalizer(const KEqualizationParams& p) const {
  return KEqualizer(p, config_.n_kv_layers(), config_.n_head_kv, config_.head_dim, config_.n_rot, config_.rope_style);
}

KvShape Model::kv_shape() const {
  KvShape s{config_.n_kv_layers(), config_.n_head_kv, config_.head_dim, config_.head_dim_v, {}, {}};
  for (const LayerConfig& lc : config_.layers)
    if (lc.kind == LayerKind::Attention) s.layer_window.push_back(lc.sliding ? config_.sliding_window : 0);
  if (const int n_state = config_.n_state_layers(); n_state > 0) {
    const GdnConfig& g = config_.gdn;
    s.recurrent = RecurrentShape{n_state, g.conv_kernel, g.n_k_heads, g.n_v_heads, g.head_dim};
  }
  return s;
}

size_t Model::weight_bytes_per_token() const {
  auto bytes = [](const WeightMatrix& w) { return w.row_stride * size_t(w.n_out); };
  size_t total = bytes(weights_.output);
  for (const auto& l : weights_.layers)
    total += bytes(l.wq) + bytes(l.wk) + bytes(l.wv) + bytes(l.wo) + bytes(l.w_gate) + bytes(l.w_up) + bytes(l.w_down) +
             bytes(l.gdn.w_qkv) + bytes(l.gdn.w_gate) + bytes(l.gdn.w_beta) + bytes(l.gdn.w_alpha) + bytes(l.gdn.w_out) +
             (config_.moe.enabled() ? moe_active_bytes(l.moe, config_) : 0);
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
    if (!b.token_from_last_argmax)
      for (int32_t t : b.tokens) check(t >= 0 && t < c.n_vocab, "token id ", t, " is out of range [0, ", c.n_vocab, ")");
    check(!b.argmax_async || (batch.size() == 1 && b.argmax && !b.logits && !b.all_logits),
          "forward pass: argmax_async is for one sequence's argmax alone");
    steps[s] = {b.kv, p0, n_s, n};
    n += n_s;
  }
  // Pipelined greedy steps (model.h): a chained step continues the last step's one-row argmax of the same
  // sequence; results of earlier async steps stay pending only while the pipeline goes on.
  const bool chained = batch.size() == 1 && batch[0].token_from_last_argmax;
  const bool async = batch.size() == 1 && batch[0].argmax_async;
  for (const BatchSeq& b : batch)
    check(!b.token_from_last_argmax || (chained && b.tokens.size() == 1 && b.kv == chain_kv_),
          "forward pass: token_from_last_argmax needs one sequence of one token right after a one-row argmax "
          "step of that sequence");
  check(!async || pending_argmax_.size() + 1 < size_t(kArgmaxSlots), "forward pass: ", pending_argmax_.size(),
        " argmax_async results are pending; finish_argmax the oldest first");
  chain_kv_ = nullptr;  // set again below when this step leaves a one-row argmax
  if (!chained && !async) drop_pending_argmax();
  check(n > 0, "forward pass needs at least one token");
  // Only the rows whose logits are wanted go through the output norm and the vocabulary matmul.
  std::vector<int32_t> out_rows;  // rows of x, in batch order
  // out0[s]: sequence s's first row among them (its logit / argmax rows are out0[s] ...).
  std::vector<int> out0(batch.size(), 0);
  bool any_argmax = false;
  for (size_t s = 0; s < batch.size(); ++s) {
    out0[s] = int(out_rows.size());
    if (!batch[s].logits && !batch[s].argmax) continue;
    any_argmax = any_argmax || batch[s].argmax;
    const int end = steps[s].row0 + steps[s].n;
    for (int r = batch[s].all_logits ? steps[s].row0 : end - 1; r < end; ++r) out_rows.push_back(r);
  }
  const int n_out = int(out_rows.size());
  std::vector<int32_t> hid_rows;  // rows of x whose final hidden states are wanted, in batch order
  for (size_t s = 0; s < batch.size(); ++s)
    if (batch[s].hidden)
      for (int i = 0; i < steps[s].n; ++i) hid_rows.push_back(steps[s].row0 + i);
  const int n_hid = int(hid_rows.size());
  // The single-sequence call on a host-memory backend writes the logits straight into the caller's
  // buffer (as large as a prompt's all-logits); otherwise they go through the workspace.
  const bool direct_logits = batch.size() == 1 && be.kind() == DeviceKind::Cpu && batch[0].logits;
  ws_.reserve(c, n, direct_logits ? 0 : n_out);
  hws_.reserve(c, n);
  if (c.moe.enabled()) moe_ws_.reserve(c, n);

  // Tokens, positions, the logit and hidden rows reach the backend in one upload:
  // ids = [tokens | pos | out_rows | hid_rows].
  std::vector<int32_t> ids;
  ids.reserve(size_t(2 * n + n_out + n_hid));
  for (const BatchSeq& b : batch) ids.insert(ids.end(), b.tokens.begin(), b.tokens.end());
  for (const StepSeq& st : steps)
    for (int i = 0; i < st.n; ++i) ids.push_back(st.pos0 + i);
  ids.insert(ids.end(), out_rows.begin(), out_rows.end());
  ids.insert(ids.end(), hid_rows.begin(), hid_rows.end());
  if (chained) {  // the token is the last step's argmax, on the backend: upload the rest, copy it in
    check(ws_.argmax == chain_argmax_, "forward pass: the workspace moved since the step whose argmax feeds this one");
    be.upload_async(ws_.ids + 1, ids.data() + 1, (ids.size() - 1) * sizeof(int32_t));
    be.copy(ws_.ids, ws_.argmax, sizeof(int32_t));
    if (be.kind() == DeviceKind::Cpu) {  // host memory, already written: an id the embedding can read
      const int32_t t = ws_.ids[0];
      check(t >= 0 && t < c.n_vocab, "token id ", t, " (the last step's argmax) is out of range [0, ", c.n_vocab, ")");
    }
  } else {
    be.upload_async(ws_.ids, ids.data(), ids.size() * sizeof(int32_t));
  }
  const int32_t* tokens = ws_.ids;
  const int32_t* pos = ws_.ids + n;
  const int32_t* gather = ws_.ids + 2 * n;
  const int32_t* gather_hidden = gather + n_out;

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
  mix(uint64_t(n_hid));
  mix(uint64_t(reinterpret_cast<uintptr_t>(ws_.hidden)));
  mix(uint64_t(layer_limit_));
  // The hybrid and MoE workspaces grow on their own (the MTP block's issue_layer_ops reserves them too):
  // a recorded step must not replay into a released buffer.
  mix(uint64_t(reinterpret_cast<uintptr_t>(hws_.qg)));
  mix(uint64_t(reinterpret_cast<uintptr_t>(moe_ws_.logits)));
  for (size_t s = 0; s < batch.size(); ++s)
    mix((uint64_t(steps[s].n) << 3) | (batch[s].hidden ? 4u : 0u) | (batch[s].logits || batch[s].argmax ? 2u : 0u) |
        (batch[s].all_logits ? 1u : 0u));
  if (!be.replay_step(key)) {
    issue_step_ops(n, n_out, tokens, pos, gather, direct_logits ? batch[0].logits : ws_.logits);
    issue_hidden_ops(n_hid, gather_hidden);
    be.end_step_ops();
  }
  for (const StepSeq& st : steps) st.kv->commit(st.pos0 + st.n);
  for (size_t s = 0, i = 0; s < batch.size(); ++s) {
    if (!batch[s].hidden) continue;
    be.download(batch[s].hidden, ws_.hidden + i * size_t(c.n_embd), size_t(steps[s].n) * size_t(c.n_embd) * sizeof(float));
    i += size_t(steps[s].n);
  }
  if (n_out == 0) {
    be.synchronize();  // the KV writes are done before the caller reads or reuses the sequences
    return;
  }
  auto out_n = [&](size_t s) { return batch[s].all_logits ? size_t(steps[s].n) : size_t(1); };  // rows of s
  if (any_argmax) {  // every out row's argmax on the backend, one download of n_out indices
    be.argmax_rows(direct_logits ? batch[0].logits : ws_.logits, n_out, c.n_vocab, ws_.argmax);
    if (async) {  // one row: copied back behind the step; finish_argmax waits for it
      if (!argmax_host_) argmax_host_ = static_cast<int32_t*>(be.allocate_host(kArgmaxSlots * sizeof(int32_t)));
      const int slot = next_argmax_slot_;
      next_argmax_slot_ = (slot + 1) % kArgmaxSlots;
      const uint64_t ticket = be.download_async(argmax_host_ + slot, ws_.argmax, sizeof(int32_t));
      pending_argmax_.push_back({ticket, slot, batch[0].argmax});
    } else {
      std::vector<int32_t> am(size_t(n_out), -1);
      be.download(am.data(), ws_.argmax, am.size() * sizeof(int32_t));
      for (size_t s = 0; s < batch.size(); ++s)
        if (batch[s].argmax) std::copy_n(am.begin() + out0[s], out_n(s), batch[s].argmax);
    }
    if (batch.size() == 1 && n_out == 1 && batch[0].argmax) {
      chain_kv_ = batch[0].kv;
      chain_argmax_ = ws_.argmax;
    }
  }
  if (direct_logits) return;
  // The callers' rows one after the other (the engine's step buffer): one download for all of them.
  float* first = nullptr;
  const float* next = nullptr;
  bool contiguous = true;
  bool any_logits = false;
  for (size_t s = 0; s < batch.size(); ++s) {
    if (!batch[s].logits) {
      contiguous = contiguous && !batch[s].argmax;  // its rows sit between the others' in ws_.logits
      continue;
    }
    if (!first) first = batch[s].logits;
    else contiguous = contiguous && batch[s].logits == next;
    next = batch[s].logits + out_n(s) * size_t(c.n_vocab);
    any_logits = true;
  }
  if (!any_logits) return;
  if (contiguous) {
    be.download(first, ws_.logits, size_t(n_out) * size_t(c.n_vocab) * sizeof(float));
    return;
  }
  for (size_t s = 0; s < batch.size(); ++s) {
    if (!batch[s].logits) continue;
    be.download(batch[s].logits, ws_.logits + size_t(out0[s]) * size_t(c.n_vocab),
                out_n(s) * size_t(c.n_vocab) * sizeof(float));
  }
}

void Model::issue_step_ops(int n, int n_out, const int32_t* tokens, const int32_t* pos, const int32_t* gather,
                           float* logits) {
  const ModelConfig& c = config_;
  const DeviceWeights& w = dev_;
  Backend& be = backend_;
  const int E = c.n_embd;
  float* x = ws_.x;
  float* h = ws_.h;
  be.embed(w.token_embd, tokens, n, c.embed_scale ? std::sqrt(float(E)) : 1.0f, x);
  const int n_layer = layer_limit_ > 0 ? std::min(layer_limit_, c.n_layer) : c.n_layer;  // set_layer_limit
  for (int il = 0; il < n_layer; ++il) {
    const LayerConfig& lc = c.layers[size_t(il)];
    // Layer il > 0 finds h = attn_norm(x) written by the previous layer's last add_rmsnorm.
    const float* next_attn_norm = il + 1 < n_layer ? w.layers[size_t(il) + 1].attn_norm : nullptr;
    const bool next_reads_once = il + 1 < n_layer && mixer_reads_once(c.layers[size_t(il) + 1]);
    issue_layer_ops(w.layers[size_t(il)], lc, lc.kv_layer, n, pos, ws_, /*h_ready=*/il > 0, next_attn_norm,
                    next_reads_once);
  }
  if (n_out == 0) return;
  // The wanted rows of x, gathered into h, normed in place, then the vocabulary matmul.
  be.gather_rows(x, gather, n_out, E, h);
  be.rmsnorm_into_matmul(h, nullptr, w.output_norm, h, n_out, E, c.rms_eps);
  be.matmul(w.output, h, logits, n_out);  // [n_out][n_vocab]
  if (c.final_softcap > 0) be.softcap(logits, int64_t(n_out) * c.n_vocab, c.final_softcap);
}

namespace {
// POLYKV_GATED_Q_SEPARATE=1: a gated-q attention layer (Qwen3.5) reads h with two matmul ops, q with its
// gate, then k and v, as before 2026-12-04d (so its norm is not deferred). For A/B runs; read once.
bool gated_q_separate() {
  static const bool on = [] {
    const char* v = std::getenv("POLYKV_GATED_Q_SEPARATE");
    return v && *v && *v != '0';
  }();
  return on;
}
}  // namespace

bool Model::mixer_reads_once(const LayerConfig& lc) const {
  if (lc.kind == LayerKind::GatedDeltaNet) return !gdn_separate_projections();  // one matmul_multi
  return !(config_.attn_output_gate && gated_q_separate());  // matmul_qkv_rope, or one matmul_multi of q, k, v
}

void Model::issue_layer_ops(const DeviceLayerWeights& l, const LayerConfig& lc, int kv_layer, int n,
                            const int32_t* pos, StepWorkspace& ws, bool h_ready, const float* next_attn_norm,
                            bool next_reads_once) {
  const ModelConfig& c = config_;
  Backend& be = backend_;
  const int E = c.n_embd, Q = int(c.q_dim()), K = int(c.kv_dim()), V = int(c.v_dim());
  float *x = ws.x, *h = ws.h, *q = ws.q, *k = ws.k, *v = ws.v, *att = ws.att, *gate = ws.gate, *up = ws.up;
  hws_.reserve(c, n);  // grow-only; the MTP block runs outside forward_batch
  if (!h_ready) {
    if (mixer_reads_once(lc)) be.rmsnorm_into_matmul(x, nullptr, l.attn_norm, h, n, E, c.rms_eps);
    else be.rmsnorm(x, l.attn_norm, h, n, E, c.rms_eps);
  }
  if (lc.kind == LayerKind::GatedDeltaNet) {
    gdn_mixer(be, c, l.gdn, lc.state_layer, hws_, h, h, n);
  } else {
    bool roped = false;  // q and k rotated (and q, k, v biased) by matmul_qkv_rope
    if (c.attn_output_gate && gated_q_separate()) {  // the form before 2026-12-04d (A/B)
      be.matmul(l.wq, h, hws_.qg, n);
      be.deinterleave(hws_.qg, n, c.n_head, c.head_dim, c.head_dim, q, hws_.attn_gate);
      const Backend::MatmulOut kv_parts[] = {{&l.wk, k}, {&l.wv, v}};
      be.matmul_multi(kv_parts, h, n);
    } else if (c.attn_output_gate) {  // attn_q rows per head: query | gate; q (with its gate), k, v in one matmul_multi
      const Backend::MatmulOut qkv_parts[] = {{&l.wq, hws_.qg}, {&l.wk, k}, {&l.wv, v}};
      be.matmul_multi(qkv_parts, h, n);
      be.deinterleave(hws_.qg, n, c.n_head, c.head_dim, c.head_dim, q, hws_.attn_gate);
    } else if (!c.qk_norm) {
      // q, k, v, their biases and the rope of q and k in one op (a backend may add and rotate in the mat-vec's
      // epilogue).
      const Backend::MatmulOut qkv[] = {{&l.wq, q}, {&l.wk, k}, {&l.wv, v}};
      QkvBias bias;
      if (c.qkv_bias) bias = {l.bq, l.bk, l.bv};
      be.matmul_qkv_rope(qkv, h, n, c.n_head, c.n_head_kv, c.head_dim, c.n_rot, pos, l.rope_inv_freq, lc.rope_scale,
                         c.rope_style, bias);
      roped = true;
    } else {
      const Backend::MatmulOut qkv[] = {{&l.wq, q}, {&l.wk, k}, {&l.wv, v}};
      be.matmul_multi(qkv, h, n);
    }
    if (c.qkv_bias && !roped) {
      be.add_bias(q, l.bq, n, Q);
      be.add_bias(k, l.bk, n, K);
      be.add_bias(v, l.bv, n, V);
    }
    if (c.qk_norm)  // per head: rows of head_dim, then the rope (qk_norm models take matmul_multi above: not roped)
      be.qk_norm_rope(q, l.q_norm, c.n_head, k, l.k_norm, c.n_head_kv, n, c.head_dim, c.rms_eps, c.n_rot, pos,
                      l.rope_inv_freq, lc.rope_scale, c.rope_style);
    else if (!roped)
      be.rope_qk(q, c.n_head, k, c.n_head_kv, n, c.head_dim, c.n_rot, pos, l.rope_inv_freq, lc.rope_scale,
                 c.rope_style);
    AttentionParams ap;
    ap.n_head = c.n_head;
    ap.scale = c.attn_scale;
    ap.softcap = c.attn_softcap;
    ap.window = lc.sliding ? c.sliding_window : 0;
    ap.sinks = l.attn_sinks;
    // Every sequence stores its rows first; then one attention call over all of them, which reads
    // the blocks sequences share (a common prefix) once for all their queries.
    be.store_kv(kv_layer, k, v);
    be.attention(kv_layer, ap, q, att);
    if (c.attn_output_gate) be.sigmoid_mul(att, hws_.attn_gate, int64_t(n) * Q);
    be.matmul(l.wo, att, h, n);
    if (c.o_bias) be.add_bias(h, l.bo, n, E);
    if (c.sandwich_norm && c.moe.enabled()) be.rmsnorm(h, l.post_attn_norm, h, n, E, c.rms_eps);
  }
  if (c.moe.enabled()) be.add_rmsnorm(x, h, l.ffn_norm, h, n, E, c.rms_eps);  // x += mixer(h); h = ffn_norm(x)
  else if (c.sandwich_norm && lc.kind != LayerKind::GatedDeltaNet)  // ... the mixer's output post-normed first
    be.post_norm_into_matmul(x, h, l.post_attn_norm, l.ffn_norm, h, n, E, c.rms_eps);
  else be.rmsnorm_into_matmul(x, h, l.ffn_norm, h, n, E, c.rms_eps);     // ... read only by gate,up's matmul_multi
  if (c.moe.enabled()) {
    moe_ws_.reserve(c, n);  // grow-only; the MTP block runs outside forward_batch
    moe_ffn(be, c, l.moe, h, n, moe_ws_, h);  // model/moe_ffn.h
  } else {
    const Backend::MatmulOut gate_up[] = {{&l.w_gate, gate}, {&l.w_up, up}};
    be.matmul_multi(gate_up, h, n);
    be.gated_activation(gate, up, int64_t(n) * l.w_gate.n_out, c.activation);  // gate = act(h·Wg) * (h·Wu)
    be.matmul(l.w_down, gate, h, n);
  }
  const bool post_ffn_fused = c.sandwich_norm && next_attn_norm && next_reads_once;
  if (c.sandwich_norm && !post_ffn_fused) be.rmsnorm(h, l.post_ffn_norm, h, n, E, c.rms_eps);
  if (post_ffn_fused)  // h = post_ffn_norm(h); x += h; h = the next layer's attn_norm(x)
    be.post_norm_into_matmul(x, h, l.post_ffn_norm, next_attn_norm, h, n, E, c.rms_eps);
  else if (next_attn_norm && next_reads_once)  // x += h; h = the next layer's attn_norm(x)
    be.rmsnorm_into_matmul(x, h, next_attn_norm, h, n, E, c.rms_eps);
  else if (next_attn_norm)
    be.add_rmsnorm(x, h, next_attn_norm, h, n, E, c.rms_eps);
  else
    be.add(x, h, int64_t(n) * E);
}

void Model::issue_hidden_ops(int n_hid, const int32_t* rows) {
  if (n_hid == 0) return;
  backend_.gather_rows(ws_.x, rows, n_hid, config_.n_embd, ws_.hidden);
  backend_.rmsnorm(ws_.hidden, dev_.output_norm, ws_.hidden, n_hid, config_.n_embd, config_.rms_eps);
}

}  // namespace polykv
