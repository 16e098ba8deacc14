// The tensors of a model shape, named and ordered as the real converter writes them (see the
// fixtures' *.gguf.txt). Shapes are ggml order, ne[0] = row length = input features:
//   token_embd [n_embd, n_vocab], output [n_embd, n_vocab] (absent when embeddings are tied),
//   attn_q [n_embd, n_head*head_dim], attn_k/attn_v [n_embd, n_head_kv*head_dim],
//   attn_output [n_head*head_dim, n_embd], ffn_gate/ffn_up [n_embd, n_ff], ffn_down [n_ff, n_embd],
//   norms [n_embd] (gemma3 q/k norms [head_dim]), qwen2 biases [rows of q/k/v], rope_freqs [head_dim/2].
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/shapes.h"

namespace polykv {

enum class SynthInit {
  Weight,     // matrix: N(0, std), stored in the requested type
  WeightF32,  // matrix kept f32 whatever the type (MoE routers, as real files keep them): N(0, std)
  Norm,       // 1-D norm weight: 1 + small noise, f32
  Bias,       // 1-D bias: N(0, std), f32
  RopeFreqs,  // llama3 rope scaling factors (model/rope_freqs.h), f32
  Decay,      // Gated DeltaNet ssm_a (a negative decay rate, -exp(A_log)): -1 + N(0, 0.1), f32
};

struct SynthTensor {
  std::string name;
  std::vector<int64_t> ne;
  SynthInit init;
};

// n_layer blocks (the shape's own count when n_layer <= 0).
std::vector<SynthTensor> synth_tensor_layout(const ModelShape& shape, int n_layer = 0);

}  // namespace polykv
