// The activations of a forward step, in a backend's memory, reused from step to step.
//
// Rules: the buffers only grow (to the largest step seen), so a steady decode allocates nothing;
// their contents are scratch, written by each step before they are read. A workspace serves one
// step at a time (Model keeps one per model and refuses concurrent calls, model/model.h).
#pragma once
#include <cstddef>
#include <cstdint>

#include "backend/backend.h"
#include "model/config.h"

namespace polykv {

class StepWorkspace {
 public:
  explicit StepWorkspace(Backend& backend) : backend_(backend) {}
  ~StepWorkspace();
  StepWorkspace(const StepWorkspace&) = delete;
  StepWorkspace& operator=(const StepWorkspace&) = delete;

  // Makes every buffer below hold at least `rows` rows of activations and `out_rows` rows of logits
  // (previous contents are lost when it grows).
  void reserve(const ModelConfig& c, int rows, int out_rows);

  float* x = nullptr;       // [rows][n_embd] the residual stream
  float* h = nullptr;       // [rows][n_embd] normed input / layer output
  float* q = nullptr;       // [rows][n_head][head_dim]
  float* k = nullptr;       // [rows][n_head_kv][head_dim]
  float* v = nullptr;       // [rows][n_head_kv][head_dim_v]
  float* att = nullptr;     // [rows][n_head][head_dim_v]
  float* gate = nullptr;    // [rows][n_ff]
  float* up = nullptr;      // [rows][n_ff]
  int32_t* ids = nullptr;   // [4][rows]: tokens, positions, the rows whose logits are wanted, then those
                            // whose hidden states are wanted
  int32_t* argmax = nullptr;  // [rows]: the argmax of each logit row (Backend::argmax_rows)
  float* hidden = nullptr;  // [rows][n_embd] final hidden states (after output_norm) of the wanted rows
  float* logits = nullptr;  // [out_rows][n_vocab]

 private:
  Backend& backend_;
  void* arena_ = nullptr;  // one allocation holding every buffer
  int rows_ = 0, out_rows_ = 0;
};

}  // namespace polykv
