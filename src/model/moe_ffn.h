// The mixture-of-experts FFN of one layer as Backend ops (backend/backend.h):
//   r = router·h (+ router bias); (ids, w) = route(r) (top-k, model/moe_config.h gating);
//   out = sum_j w_j · expert_{ids_j}(h)                        (backend moe_experts, grouped by expert)
//       [+ sigmoid(gate_inp_shexp·h) · down_sh(silu(gate_sh·h) ⊙ up_sh·h)]   (shared expert, if any)
// Every op computes a row from that row only, so a token's result does not depend on its batch.
#pragma once
#include <cstdint>

#include "backend/backend.h"
#include "model/config.h"
#include "model/moe_weights.h"

namespace polykv {

// The MoE FFN's activations in backend memory, grow-only (as StepWorkspace); one step at a time.
class MoeWorkspace {
 public:
  explicit MoeWorkspace(Backend& backend) : backend_(backend) {}
  ~MoeWorkspace();
  MoeWorkspace(const MoeWorkspace&) = delete;
  MoeWorkspace& operator=(const MoeWorkspace&) = delete;
  void reserve(const ModelConfig& c, int rows);

  float* logits = nullptr;   // [rows][n_expert]
  int32_t* ids = nullptr;    // [rows][n_used]
  float* weights = nullptr;  // [rows][n_used]
  float* sh_g = nullptr;     // [rows] shared expert gate logit
  float* sh_gate = nullptr;  // [rows][n_ff_shexp]
  float* sh_up = nullptr;    // [rows][n_ff_shexp]
  float* sh_out = nullptr;   // [rows][n_embd]

 private:
  Backend& backend_;
  void* arena_ = nullptr;
  int rows_ = 0;
};

// out[n][n_embd] = moe(h[n][n_embd]); out may alias h. ws must hold n rows (reserve).
void moe_ffn(Backend& be, const ModelConfig& c, const DeviceMoeWeights& w, const float* h, int n, MoeWorkspace& ws,
             float* out);

// Throws Error when `backend` cannot run c, so that loading such a model elsewhere fails clearly before
// any weight is uploaded (today CPU and CUDA run every MoE and gpt-oss feature: nothing is refused).
void check_backend_runs(const ModelConfig& c, const Backend& backend);

}  // namespace polykv
