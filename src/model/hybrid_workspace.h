// The extra activations of a hybrid model's step (gated attention, Gated DeltaNet), in the backend's
// memory, grown to the largest step and reused (the same rules as StepWorkspace, model/step_workspace.h).
#pragma once
#include "backend/backend.h"
#include "model/config.h"

namespace polykv {

class HybridWorkspace {
 public:
  explicit HybridWorkspace(Backend& backend) : backend_(backend) {}
  ~HybridWorkspace();
  HybridWorkspace(const HybridWorkspace&) = delete;
  HybridWorkspace& operator=(const HybridWorkspace&) = delete;

  // Makes every buffer hold `rows` rows; nothing when the config has neither gated attention nor GDN layers.
  void reserve(const ModelConfig& c, int rows);

  float* qg = nullptr;         // [rows][n_head][2 * head_dim]  attn_q output: query | gate per head
  float* attn_gate = nullptr;  // [rows][n_head][head_dim]
  float* qkv = nullptr;        // [rows][conv_channels]  attn_qkv output (the convolution's input)
  float* conv = nullptr;       // [rows][conv_channels]  the convolution's output
  float* z = nullptr;          // [rows][n_v][d]          attn_gate output (the gated norm's gate)
  float* alpha = nullptr;      // [rows][n_v]
  float* beta = nullptr;       // [rows][n_v]
  float* o = nullptr;          // [rows][n_v][d]          the delta rule's output

 private:
  Backend& backend_;
  void* arena_ = nullptr;
  int rows_ = 0;
};

}  // namespace polykv
