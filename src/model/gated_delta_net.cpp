#include "model/gated_delta_net.h"

#include <cmath>
#include <cstdlib>

namespace polykv {

bool gdn_separate_projections() {
  static const bool separate = [] {
    const char* v = std::getenv("POLYKV_GDN_SEPARATE_PROJ");
    return v && *v && *v != '0';
  }();
  return separate;
}

void gdn_mixer(Backend& be, const ModelConfig& c, const DeviceGdnWeights& w, int state_layer, HybridWorkspace& ws,
               const float* h, float* y, int n) {
  const GdnConfig& g = c.gdn;
  // The four input projections read the same h: one matmul_multi (the same bits as four matmuls, by the
  // Backend contract; on CUDA one mat-vec launch when they share a type, where four launches cost ~0.35 ms
  // of a 2.6 ms Qwen3.5-9B token, docs/HYBRID.md). POLYKV_GDN_SEPARATE_PROJ=1: four matmuls (A/B).
  if (gdn_separate_projections()) {
    be.matmul(w.w_qkv, h, ws.qkv, n);
    be.matmul(w.w_gate, h, ws.z, n);
    be.matmul(w.w_beta, h, ws.beta, n);
    be.matmul(w.w_alpha, h, ws.alpha, n);
  } else {
    const Backend::MatmulOut parts[] = {{&w.w_qkv, ws.qkv}, {&w.w_gate, ws.z}, {&w.w_beta, ws.beta}, {&w.w_alpha, ws.alpha}};
    be.matmul_multi(parts, h, n);
  }
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
