// The MoE FFN weights of one layer (model/config.h MoeConfig), bound from the GGUF's 3-D expert
// tensors: ffn_gate_exps / ffn_up_exps ne = [n_embd, n_ff_exp, n_expert], ffn_down_exps ne =
// [n_ff_exp, n_embd, n_expert]; expert e is the e-th [out][in] slice, in the stored type (any weight
// type). The router ffn_gate_inp ne = [n_embd, n_expert]; the shared expert ffn_*_shexp is a dense
// SwiGLU behind the scalar gate ffn_gate_inp_shexp ne = [n_embd, 1].
#pragma once
#include <string>
#include <vector>

#include "backend/backend.h"
#include "gguf/gguf.h"
#include "model/config.h"

namespace polykv {

struct MoeLayerWeights {
  WeightMatrix router;                        // [n_expert][n_embd]
  std::vector<float> router_bias;             // [n_expert] (router_bias only)
  std::vector<WeightMatrix> gate, up, down;   // [n_expert] slices: [n_ff_exp][n_embd], .., [n_embd][n_ff_exp]
  std::vector<float> gate_bias, up_bias;      // [n_expert][n_ff_exp] (expert_bias only)
  std::vector<float> down_bias;               // [n_expert][n_embd] (expert_bias only)
  WeightMatrix sh_gate, sh_up, sh_down;       // shared expert (n_ff_shexp > 0): [F][n_embd], .., [n_embd][F]
  WeightMatrix sh_gate_inp;                   // [1][n_embd]
};

// Binds layer `prefix` ("blk.N.")'s MoE tensors; throws Error naming a missing tensor or a wrong
// shape or type. pack: as bind_weights (model/weights.h).
MoeLayerWeights bind_moe_weights(const GgufFile& f, const ModelConfig& c, const std::string& prefix, bool pack);

// The same weights in a backend's memory, as its MoE ops take them.
struct DeviceMoeWeights {
  WeightMatrix router;
  const float* router_bias = nullptr;  // [n_expert] or nullptr
  MoeExperts experts;
  WeightMatrix sh_gate, sh_up, sh_down, sh_gate_inp;  // n_out = 0 when absent
};
DeviceMoeWeights upload_moe_weights(Backend& backend, const MoeLayerWeights& w, const ModelConfig& c);

// Bytes of weights one token reads in this layer's FFN: router, its k experts (the average expert's
// size) and the shared expert.
size_t moe_active_bytes(const MoeLayerWeights& w, const ModelConfig& c);

}  // namespace polykv
