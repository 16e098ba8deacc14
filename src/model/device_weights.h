// The weights as the forward pass reads them: every matrix and float vector of ModelWeights (plus
// the RoPE frequencies) uploaded once, at load, into the backend's memory. The host ModelWeights
// stay as they are (reference code and reports read them); on the CPU backend both name the same
// bytes.
#pragma once
#include <vector>

#include "backend/backend.h"
#include "model/config.h"
#include "model/gdn_weights.h"
#include "model/weights.h"

namespace polykv {

struct DeviceLayerWeights {
  const float* attn_norm = nullptr;      // [n_embd]
  WeightMatrix wq, wk, wv, wo;           // as LayerWeights, rows in backend memory
  const float* bq = nullptr;             // [q_dim] (qkv_bias only, else nullptr)
  const float* bk = nullptr;             // [kv_dim]
  const float* bv = nullptr;             // [v_dim]
  const float* bo = nullptr;             // [n_embd] (o_bias only)
  const float* attn_sinks = nullptr;     // [n_head] (attn_sinks only)
  const float* q_norm = nullptr;         // [head_dim] (qk_norm only)
  const float* k_norm = nullptr;         // [head_dim]
  const float* post_attn_norm = nullptr; // [n_embd] (sandwich_norm only)
  const float* ffn_norm = nullptr;       // [n_embd]
  WeightMatrix w_gate, w_up, w_down;
  const float* post_ffn_norm = nullptr;  // [n_embd] (sandwich_norm only)
  const float* rope_inv_freq = nullptr;  // [n_rot / 2] this layer's RoPE frequencies
  DeviceGdnWeights gdn;                  // LayerKind::GatedDeltaNet only
  DeviceMoeWeights moe;                  // the MoE FFN (config.moe.enabled() only)
};

struct DeviceWeights {
  WeightMatrix token_embd;                 // [n_vocab][n_embd]
  std::vector<DeviceLayerWeights> layers;  // [n_layer]
  const float* output_norm = nullptr;      // [n_embd]
  WeightMatrix output;                     // [n_vocab][n_embd]; the same upload as token_embd when tied
};

// Uploads every weight through `backend`. inv_freq: [n_layer][n_rot / 2]. The host vectors must not
// change while the result is in use (the CPU backend keeps their pointers).
DeviceWeights upload_weights(Backend& backend, const ModelWeights& w,
                             const std::vector<std::vector<float>>& inv_freq, const ModelConfig& c);
// One layer's weights (inv_freq: [n_rot / 2]); the same rule on the host vectors.
DeviceLayerWeights upload_layer(Backend& backend, const LayerWeights& l, const std::vector<float>& inv_freq,
                                const ModelConfig& c);

}  // namespace polykv
