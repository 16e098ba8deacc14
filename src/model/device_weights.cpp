#include "model/device_weights.h"

namespace polykv {

DeviceLayerWeights upload_layer(Backend& backend, const LayerWeights& l, const std::vector<float>& inv_freq,
                                const ModelConfig& c) {
  // An absent vector (a feature the config does not use) stays nullptr.
  auto floats = [&](const std::vector<float>& v) -> const float* {
    return v.empty() ? nullptr : backend.upload_floats(v);
  };
  DeviceLayerWeights dl;
  dl.attn_norm = floats(l.attn_norm);
  dl.wq = backend.upload_matrix(l.wq);
  dl.wk = backend.upload_matrix(l.wk);
  dl.wv = backend.upload_matrix(l.wv);
  dl.wo = backend.upload_matrix(l.wo);
  dl.bq = floats(l.bq);
  dl.bk = floats(l.bk);
  dl.bv = floats(l.bv);
  dl.bo = floats(l.bo);
  dl.attn_sinks = floats(l.attn_sinks);
  dl.q_norm = floats(l.q_norm);
  dl.k_norm = floats(l.k_norm);
  dl.post_attn_norm = floats(l.post_attn_norm);
  dl.ffn_norm = floats(l.ffn_norm);
  if (!c.moe.enabled()) {
    dl.w_gate = backend.upload_matrix(l.w_gate);
    dl.w_up = backend.upload_matrix(l.w_up);
    dl.w_down = backend.upload_matrix(l.w_down);
  }
  dl.post_ffn_norm = floats(l.post_ffn_norm);
  dl.rope_inv_freq = floats(inv_freq);
  if (l.gdn.w_qkv.data) dl.gdn = upload_gdn_layer(backend, l.gdn);
  if (c.moe.enabled()) dl.moe = upload_moe_weights(backend, l.moe, c);
  return dl;
}

DeviceWeights upload_weights(Backend& backend, const ModelWeights& w,
                             const std::vector<std::vector<float>>& inv_freq, const ModelConfig& c) {
  auto floats = [&](const std::vector<float>& v) -> const float* {
    return v.empty() ? nullptr : backend.upload_floats(v);
  };
  DeviceWeights d;
  d.token_embd = backend.upload_matrix(w.token_embd);
  d.output_norm = floats(w.output_norm);
  // Tied embeddings: one upload serves both.
  d.output = w.output.data == w.token_embd.data ? d.token_embd : backend.upload_matrix(w.output);
  d.layers.reserve(w.layers.size());
  for (size_t il = 0; il < w.layers.size(); ++il) d.layers.push_back(upload_layer(backend, w.layers[il], inv_freq[il], c));
  return d;
}

}  // namespace polykv
