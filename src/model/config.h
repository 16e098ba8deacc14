// Model hyperparameters as data: every supported architecture is one ModelConfig, filled from GGUF
// metadata by its family's file (model/arch_*.cpp), and run by the one decoder in model/transformer.cpp.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/layer_kinds.h"
#include "gguf/gguf.h"
#include "model/moe_config.h"
#include "model/yarn_rope.h"

namespace polykv {

// How a layer mixes positions: softmax attention over the KV, or a Gated DeltaNet (linear attention
// with a fixed-size recurrent state, kv/recurrent_state.h; hybrid models such as qwen35).
enum class LayerKind { Attention, GatedDeltaNet };

struct LayerConfig {
  bool sliding = false;    // local attention over the last `sliding_window` positions
  float rope_base = 10000.0f;
  float rope_scale = 1.0f;  // linear rope scaling: positions divided by this
  LayerKind kind = LayerKind::Attention;
  int kv_layer = -1;     // Attention: its layer in the KV (attention layers counted in order)
  int state_layer = -1;  // GatedDeltaNet: its layer in the recurrent state
};

// Gated DeltaNet sizes (ssm.* keys): n_k_heads key heads, n_v_heads value heads of head_dim each,
// a causal convolution of conv_kernel taps over the q|k|v channels.
struct GdnConfig {
  int n_k_heads = 0;
  int n_v_heads = 0;
  int head_dim = 0;
  int conv_kernel = 0;
  int qk_dim() const { return n_k_heads * head_dim; }
  int v_dim() const { return n_v_heads * head_dim; }
  int conv_channels() const { return 2 * qk_dim() + v_dim(); }
};

struct ModelConfig {
  std::string arch;  // GGUF general.architecture
  int n_layer = 0;     // main decoder layers (block_count - n_nextn)
  int n_nextn = 0;     // nextn_predict_layers: MTP blocks blk.n_layer ... (model/mtp_head.h), not run by forward
  int n_embd = 0;
  int n_ff = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;    // key/query head size
  int head_dim_v = 0;  // value head size
  int n_rot = 0;       // rotated dimensions per head (<= head_dim)
  int n_vocab = 0;
  int n_ctx_train = 0;
  float rms_eps = 1e-5f;
  RopeStyle rope_style = RopeStyle::Norm;
  Activation activation = Activation::SiLU;
  float attn_scale = 0.0f;         // scores are q·k * attn_scale
  float attn_softcap = 0.0f;       // 0: none; else scores = c * tanh(scores / c)
  float final_softcap = 0.0f;      // same for the output logits
  int sliding_window = 0;          // a query at q sees keys p with q - W < p <= q on sliding layers
  bool embed_scale = false;        // embeddings multiplied by sqrt(n_embd) (gemma)
  bool qkv_bias = false;           // qwen2
  bool qk_norm = false;            // per-head RMSNorm of q and k before rope (qwen3, gemma3)
  bool sandwich_norm = false;      // extra norms after attention and after the MLP (gemma2/3)
  bool attn_output_gate = false;   // attn_q rows per head are [query | gate]; out *= sigmoid(gate) (qwen35)
  GdnConfig gdn;                   // GatedDeltaNet layers only
  std::vector<LayerConfig> layers;  // [n_layer]
  // Mixture of experts and gpt-oss (model/moe_config.h):
  MoeConfig moe;                   // moe.enabled(): the FFN is routed experts (model/moe_ffn.h)
  bool o_bias = false;             // attn_output.bias (gpt-oss)
  bool attn_sinks = false;         // attn_sinks: one logit per head in the softmax denominator (gpt-oss)
  std::string ffn_norm_tensor = "ffn_norm";  // the FFN's pre-norm (gpt-oss: post_attention_norm)
  YarnRope yarn;                             // yarn.factor > 1: YaRN (rope_freq_divisors, attn_scale carry it)
  std::vector<float> rope_freq_divisors;     // [n_rot / 2] inv_freq_i /= these (YaRN); empty: none

  int q_dim() const { return n_head * head_dim; }
  int kv_dim() const { return n_head_kv * head_dim; }
  int v_dim() const { return n_head_kv * head_dim_v; }
  int n_kv_layers() const;     // layers of kind Attention (they have KV)
  int n_state_layers() const;  // layers of kind GatedDeltaNet (they have a recurrent state)
};

// Numbers the layers' kv_layer / state_layer from their kinds (config_from_gguf does it after the family's fill).
void assign_layer_slots(ModelConfig& c);

// RoPE settings a user puts over the file's (llama.cpp's --rope-scaling, --rope-scale, --rope-freq-base,
// --yarn-orig-ctx): run a model past its training context. Unset fields keep the file's values.
//   scaling "none": no scaling; "linear": positions divided by scale; "yarn": YaRN (model/yarn_rope.h) with
//   factor scale over an original context of yarn_orig_ctx (default: the file's, else its context_length).
// Linear and YaRN set the model's context (n_ctx_train) to the original context times the scale (for a file with
// linear scaling, the original is its context_length over its factor: a new factor replaces the file's).
struct RopeOverride {
  std::string scaling;    // "", "none", "linear", "yarn"
  float scale = 0;        // > 0: the scaling factor (needs scaling linear or yarn, given or in the file)
  float freq_base = 0;    // > 0: RoPE base θ of every layer that is not sliding
  int yarn_orig_ctx = 0;  // > 0: YaRN's original context
  bool empty() const { return scaling.empty() && scale <= 0 && freq_base <= 0 && yarn_orig_ctx <= 0; }
};

// Fills a ModelConfig from a GGUF file's metadata (then the override); throws Error naming an
// unsupported architecture or a missing/invalid hyperparameter or override.
ModelConfig config_from_gguf(const GgufFile& f, const RopeOverride& rope = {});

// One registered architecture family: the architecture strings it accepts and how it reads them.
struct ArchFamily {
  const char* const* names;  // null-terminated list of general.architecture values
  void (*fill)(const GgufFile& f, ModelConfig& c);  // after the common keys are read
};
const ArchFamily& llama_family();  // llama, qwen2, qwen3
const ArchFamily& gemma_family();  // gemma2, gemma3
const ArchFamily& qwen35_family(); // qwen35 (Gated DeltaNet hybrid)
const ArchFamily& moe_family();    // qwen3moe, gpt-oss (model/arch_moe.cpp)

}  // namespace polykv
