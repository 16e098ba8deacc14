// The weights of a Gated DeltaNet layer (hybrid models, model/config.h LayerKind::GatedDeltaNet), host
// side (bound from the GGUF) and as the backend reads them. Value heads are in the GGUF's "tiled" order
// (value head j pairs with key head j % n_k_heads); every per-value-head tensor follows that order.
#pragma once
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/matmul.h"
#include "gguf/gguf.h"
#include "model/config.h"

namespace polykv {

struct GdnLayerWeights {
  WeightMatrix w_qkv;             // attn_qkv  [conv_channels][n_embd]: rows q [n_k][d] | k [n_k][d] | v [n_v][d]
  WeightMatrix w_gate;            // attn_gate [n_v * d][n_embd] (z of the gated norm)
  WeightMatrix w_beta;            // ssm_beta  [n_v][n_embd]
  WeightMatrix w_alpha;           // ssm_alpha [n_v][n_embd]
  std::vector<float> conv;        // ssm_conv1d [conv_channels][conv_kernel]
  std::vector<float> dt_bias;     // ssm_dt.bias [n_v]
  std::vector<float> a;           // ssm_a [n_v] = -exp(A_log)
  std::vector<float> norm;        // ssm_norm [d] (used as stored: no +1)
  WeightMatrix w_out;             // ssm_out [n_embd][n_v * d]
};

struct DeviceGdnWeights {
  WeightMatrix w_qkv, w_gate, w_beta, w_alpha, w_out;
  const float* conv = nullptr;     // [conv_channels][conv_kernel]
  const float* dt_bias = nullptr;  // [n_v]
  const float* a = nullptr;        // [n_v]
  const float* norm = nullptr;     // [d]
};

// Binds blk.N.* (prefix "blk.N.") of a GatedDeltaNet layer; throws Error naming a missing or misshapen tensor.
// matrix(name, n_in, n_out) binds one matrix, vec(name, n) one float vector (the caller's binders).
struct GdnBinders {
  WeightMatrix (*matrix)(const GgufFile& f, const std::string& name, int64_t n_in, int64_t n_out, bool pack);
  std::vector<float> (*vec)(const GgufFile& f, const std::string& name, int64_t n);
};
GdnLayerWeights bind_gdn_layer(const GgufFile& f, const ModelConfig& c, const std::string& prefix, bool pack,
                               const GdnBinders& b);
DeviceGdnWeights upload_gdn_layer(Backend& backend, const GdnLayerWeights& w);

}  // namespace polykv
