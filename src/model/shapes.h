// Hyperparameters of real model families, for synthesizing random-weight GGUF files of the right
// shape (see model/synth.h). Values are those of the published Hugging Face configs.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace polykv {

// llama3-style RoPE frequency scaling (rope_type "llama3"), stored in GGUF as the rope_freqs tensor.
struct Llama3RopeScaling {
  double factor = 0;            // 0: no llama3 scaling
  double low_freq_factor = 1;
  double high_freq_factor = 4;
  double original_context = 8192;
};

struct ModelShape {
  std::string name;  // e.g. "llama-3.2-1b"
  std::string arch;  // GGUF general.architecture: "llama", "qwen2" or "gemma3"
  int n_layer = 0;
  int n_embd = 0;
  int n_ff = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;     // per-head size of q, k and v
  int n_vocab = 0;      // >= 259: 3 special + 256 byte tokens
  int n_ctx = 0;        // context_length as the converter writes it
  float rope_theta = 10000.0f;
  float rms_eps = 1e-5f;
  bool tied_embeddings = false;  // true: no output.weight, the output reuses token_embd
  bool qkv_bias = false;         // qwen2: attn_{q,k,v}.bias
  Llama3RopeScaling llama3_rope;
  float rope_linear_factor = 0;  // gemma3 global layers: rope.scaling linear (0: none)
  // gemma3: local layers use a sliding window and their own RoPE base; every swa_pattern-th layer
  // (layer % pattern == pattern - 1) is global. Real gemma3 GGUFs do not store the pattern (the
  // architecture implies 6), so synth does not write it either.
  int sliding_window = 0;
  int swa_pattern = 0;
  float rope_theta_swa = 0;
  // Mixture of experts (arch "qwen3moe", "gpt-oss"; model/synth_moe.h): n_expert > 0 replaces the
  // dense FFN by n_expert experts of n_ff_exp, n_expert_used per token. gpt-oss also has q/k/v/o
  // biases, attention sinks, sliding_window on even layers and YaRN (yarn_factor, yarn_orig_ctx).
  int n_expert = 0;
  int n_expert_used = 0;
  int n_ff_exp = 0;
  float yarn_factor = 0;
  int yarn_orig_ctx = 0;
  // Qwen3.5 hybrid (arch "qwen35", "qwen35moe"; model/synth_qwen35.h): Gated DeltaNet layers with
  // gdn_k_heads key / gdn_v_heads value heads of gdn_head_dim, a causal conv of gdn_conv_kernel, and
  // every full_attention_interval-th layer gated full attention with NEOX rope on n_rot dims.
  // qwen35moe adds a shared expert of n_ff_shexp. gdn_v_heads == 0: not a hybrid.
  int gdn_k_heads = 0;
  int gdn_v_heads = 0;
  int gdn_head_dim = 0;
  int gdn_conv_kernel = 0;
  int full_attention_interval = 0;
  int n_rot = 0;
  int n_ff_shexp = 0;
};

// The known shapes, real models first, then the tiny test shapes ("tiny", "tiny-qwen2", "tiny-gemma3").
const std::vector<ModelShape>& model_shapes();
// The shape called `name`; throws Error listing the valid names if there is none.
const ModelShape& find_model_shape(const std::string& name);

}  // namespace polykv
