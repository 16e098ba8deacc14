// What a mixture-of-experts FFN and gpt-oss's attention add to a ModelConfig (model/config.h), as
// data filled by the family's file (model/arch_moe.cpp); the one decoder runs them.
#pragma once
#include <vector>

#include "backend/moe.h"

namespace polykv {

struct MoeConfig {
  int n_expert = 0;      // 0: a dense FFN (ffn_gate/up/down); else ffn_*_exps and the router ffn_gate_inp
  int n_used = 0;        // experts per token (top-k)
  int n_ff_exp = 0;      // rows of one expert's gate/up
  int n_ff_shexp = 0;    // 0: no shared expert; else its size (ffn_*_shexp behind sigmoid(ffn_gate_inp_shexp·h))
  MoeGating gating = MoeGating::SoftmaxTopKRenorm;
  MoeActivation act = MoeActivation::SwiGLU;
  float alpha = 1.702f;  // SwiGLUClamped constants (not in the file)
  float limit = 7.0f;
  bool router_bias = false;  // ffn_gate_inp.bias
  bool expert_bias = false;  // ffn_{gate,up,down}_exps.bias ([n_expert][rows], f32)

  bool enabled() const { return n_expert > 0; }
  MoeRouting routing() const { return {n_expert, n_used, gating}; }
};

}  // namespace polykv
