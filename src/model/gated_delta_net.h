// The Gated DeltaNet mixer of a hybrid model's linear-attention layer, written against Backend ops:
//   qkv = W_qkv h; z = W_gate h; beta = W_beta h; alpha = W_alpha h            (raw projections)
//   c = silu(causal_conv(qkv))   (continuing from the sequence's conv state)
//   o = gated_delta_rule(l2norm(q) / sqrt(d), l2norm(k), v, g = softplus(alpha + dt_bias) a, sigmoid(beta))
//   y = W_out (rmsnorm_per_head(o) * ssm_norm * silu(z))
#pragma once
#include "backend/backend.h"
#include "model/config.h"
#include "model/gdn_weights.h"
#include "model/hybrid_workspace.h"

namespace polykv {

// h: [n][n_embd] (normed input, backend memory); y: [n][n_embd] (may alias h).
// POLYKV_GDN_SEPARATE_PROJ=1: the four input projections as four matmuls (A/B); else one matmul_multi, the
// only reader of the mixer's input h (what Backend::rmsnorm_into_matmul asks of its caller).
bool gdn_separate_projections();

void gdn_mixer(Backend& be, const ModelConfig& c, const DeviceGdnWeights& w, int state_layer, HybridWorkspace& ws,
               const float* h, float* y, int n);

}  // namespace polykv
