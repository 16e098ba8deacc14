// Mixture-of-experts FFN as the Backend seam sees it (backend/backend.h): how rows are routed to
// experts and the expert matrices of one layer. The model fills these from its config and weights
// (model/moe_ffn.h); a backend runs them (CPU: backend/cpu/moe_cpu.h).
#pragma once
#include <vector>

#include "backend/cpu/matmul.h"

namespace polykv {

// How the router's logits r (one per expert, router bias already added) become the chosen experts
// and their weights. The k chosen are the k largest r (ties: the lower expert index), in descending
// order of r; that slot order is also the order a token's expert outputs are summed in.
enum class MoeGating {
  SoftmaxTopK,        // w = softmax(r over all experts) at the chosen (not renormalised)
  SoftmaxTopKRenorm,  // the same renormalised to sum 1 = softmax over the chosen r (qwen3moe, qwen35moe)
  TopKSoftmax,        // softmax over the chosen r only (gpt-oss); the same weights as SoftmaxTopKRenorm
};

// The expert's gated activation of gate g and up u (per element):
enum class MoeActivation {
  SwiGLU,         // silu(g) * u
  SwiGLUClamped,  // g = min(g, limit), u = clamp(u, -limit, limit); (u + 1) * g * sigmoid(alpha * g) (gpt-oss)
};

struct MoeRouting {
  int n_expert = 0;  // experts
  int n_used = 0;    // k: experts per token (1 <= k <= n_expert)
  MoeGating gating = MoeGating::SoftmaxTopKRenorm;
};

// The routed experts of one layer. Expert e's matrices are gate[e], up[e] ([n_ff][n_embd]) and
// down[e] ([n_embd][n_ff]), slices of the file's 3-D tensors in their stored type (backend memory).
struct MoeExperts {
  int n_embd = 0, n_ff = 0;
  std::vector<WeightMatrix> gate, up, down;  // [n_expert] each
  const float* gate_bias = nullptr;          // [n_expert][n_ff] or nullptr (gpt-oss has them)
  const float* up_bias = nullptr;            // [n_expert][n_ff] or nullptr
  const float* down_bias = nullptr;          // [n_expert][n_embd] or nullptr
  MoeActivation act = MoeActivation::SwiGLU;
  float alpha = 1.702f;  // SwiGLUClamped only
  float limit = 7.0f;    // SwiGLUClamped only
  int n_expert() const { return int(gate.size()); }
};

}  // namespace polykv
