#include "model/gdn_weights.h"

namespace polykv {

GdnLayerWeights bind_gdn_layer(const GgufFile& f, const ModelConfig& c, const std::string& p, bool pack,
                               const GdnBinders& b) {
  const GdnConfig& g = c.gdn;
  GdnLayerWeights w;
  w.w_qkv = b.matrix(f, p + "attn_qkv.weight", c.n_embd, g.conv_channels(), pack);
  w.w_gate = b.matrix(f, p + "attn_gate.weight", c.n_embd, g.v_dim(), pack);
  w.w_beta = b.matrix(f, p + "ssm_beta.weight", c.n_embd, g.n_v_heads, pack);
  w.w_alpha = b.matrix(f, p + "ssm_alpha.weight", c.n_embd, g.n_v_heads, pack);
  w.conv = b.vec(f, p + "ssm_conv1d.weight", int64_t(g.conv_channels()) * g.conv_kernel);
  w.dt_bias = b.vec(f, p + "ssm_dt.bias", g.n_v_heads);
  w.a = b.vec(f, p + "ssm_a", g.n_v_heads);
  w.norm = b.vec(f, p + "ssm_norm.weight", g.head_dim);
  w.w_out = b.matrix(f, p + "ssm_out.weight", g.v_dim(), c.n_embd, pack);
  return w;
}

DeviceGdnWeights upload_gdn_layer(Backend& backend, const GdnLayerWeights& w) {
  DeviceGdnWeights d;
  d.w_qkv = backend.upload_matrix(w.w_qkv);
  d.w_gate = backend.upload_matrix(w.w_gate);
  d.w_beta = backend.upload_matrix(w.w_beta);
  d.w_alpha = backend.upload_matrix(w.w_alpha);
  d.w_out = backend.upload_matrix(w.w_out);
  d.conv = backend.upload_floats(w.conv);
  d.dt_bias = backend.upload_floats(w.dt_bias);
  d.a = backend.upload_floats(w.a);
  d.norm = backend.upload_floats(w.norm);
  return d;
}

}  // namespace polykv
