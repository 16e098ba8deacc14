#include "model/gated_delta_net.h"

#include <cmath>

namespace polykv {

void gdn_mixer(Backend& be, const ModelConfig& c, const DeviceGdnWeights& w, int state_layer, HybridWorkspace& ws,
               const float* h, float* y, int n) {
  const GdnConfig& g = c.gdn;
  be.matmul(w.w_qkv, h, ws.qkv, n);
  be.matmul(w.w_gate, h, ws.z, n);
  be.matmul(w.w_beta, h, ws.beta, n);
  be.matmul(w.w_alpha, h, ws.alpha, n);
  be.ssm_conv(state_layer, w.conv, g.conv_kernel, ws.qkv, ws.conv, g.conv_channels());
  GdnParams p;
  p.n_k_heads = g.n_k_heads;
  p.n_v_heads = g.n_v_heads;
  p.head_dim = g.head_dim;
  p.q_scale = 1.0f / std::sqrt(float(g.head_dim));
  be.gated_delta_rule(state_layer, p, ws.conv, ws.alpha, ws.beta, w.dt_bias, w.a, ws.o);
  // Gated norm: per value head RMSNorm (one weight vector for all heads), times silu(z).
  be.rmsnorm(ws.o, w.norm, ws.o, n * g.n_v_heads, g.head_dim, c.rms_eps);
  be.gated_activation(ws.z, ws.o, int64_t(n) * g.v_dim(), Activation::SiLU);  // z = silu(z) * o
  be.matmul(w.w_out, ws.z, y, n);
}

}  // namespace polykv
