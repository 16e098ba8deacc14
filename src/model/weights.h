// A model's weights, bound by name from a GGUF file and checked for shape and type at load.
// Matrices stay in the file's memory map in their stored types; 1-D vectors (norms, biases) are
// converted to f32 copies.
#pragma once
#include <string>
#include <vector>

#include "backend/cpu/matmul.h"
#include "gguf/gguf.h"
#include "model/config.h"
#include "model/gdn_weights.h"
#include "model/moe_weights.h"

namespace polykv {

struct LayerWeights {
  std::vector<float> attn_norm;        // [n_embd]
  WeightMatrix wq, wk, wv, wo;         // [q_dim (x2 with attn_output_gate)][n_embd], [kv_dim][n_embd], [v_dim][n_embd], [n_embd][n_head*head_dim_v]
  std::vector<float> bq, bk, bv;       // [q_dim], [kv_dim], [v_dim] (qkv_bias only)
  std::vector<float> bo;               // [n_embd] (o_bias only)
  std::vector<float> attn_sinks;       // [n_head] (attn_sinks only)
  std::vector<float> q_norm, k_norm;   // [head_dim] (qk_norm only)
  std::vector<float> post_attn_norm;   // [n_embd] (sandwich_norm only)
  std::vector<float> ffn_norm;         // [n_embd]
  WeightMatrix w_gate, w_up, w_down;   // [n_ff][n_embd], [n_ff][n_embd], [n_embd][n_ff]
  std::vector<float> post_ffn_norm;    // [n_embd] (sandwich_norm only)
  GdnLayerWeights gdn;                 // LayerKind::GatedDeltaNet only (then wq..bv, q_norm, k_norm are empty)
  MoeLayerWeights moe;                 // moe.enabled() only (then w_gate/w_up/w_down are empty)
};

struct ModelWeights {
  WeightMatrix token_embd;             // [n_vocab][n_embd]
  std::vector<LayerWeights> layers;    // [n_layer]
  std::vector<float> output_norm;      // [n_embd]
  WeightMatrix output;                 // [n_vocab][n_embd] (token_embd when tied)
  std::vector<float> rope_inv_freq_factors;  // [n_rot/2] llama3 rope_freqs, empty if absent
};

// Binds every tensor the config needs; throws Error naming a missing tensor, a wrong shape or an
// unsupported weight type. pack_for_cpu: give each matrix the CPU backend's packed copy where it has
// one (pack_for_matmul) and drop the original's file pages where matmul no longer reads them; a
// device backend, which uploads the original rows, passes false.
ModelWeights bind_weights(const GgufFile& f, const ModelConfig& c, bool pack_for_cpu = true);
// One matrix [n_out][n_in] / one f32 vector [n] by name, checked as bind_weights checks them.
WeightMatrix bind_matrix(const GgufFile& f, const std::string& name, int64_t n_in, int64_t n_out, bool pack_for_cpu);
std::vector<float> bind_vector(const GgufFile& f, const std::string& name, int64_t n);
// One block's weights, blk.{il}.* (il may be past n_layer: the MTP blocks, model/mtp_head.h).
LayerWeights bind_layer(const GgufFile& f, const ModelConfig& c, int il, bool pack_for_cpu);

// After pack_for_matmul: drops w's original pages from f's map where matmul no longer reads them.
void release_unread_original(const GgufFile& f, const WeightMatrix& w);

}  // namespace polykv
