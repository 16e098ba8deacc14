// The mixture-of-experts families:
//  - qwen3moe: qwen3 attention (per-head q/k RMSNorm, NEOX rope); every FFN routed: softmax over all
//    experts, top-k, renormalised (norm_topk_prob; no key says so), SwiGLU experts.
//  - gpt-oss: q/k/v/o biases, attention sinks, sliding window on even layers (il % 2 == 0, no key),
//    YaRN rope (transformers' unrounded correction range); router with bias, softmax over the chosen
//    logits, experts with biases and the clamped SwiGLU (alpha 1.702, limit 7, up + 1; not in the
//    file); the FFN's pre-norm is post_attention_norm. Conventions: fixtures/README.md.
#include "core/error.h"
#include "model/config.h"

namespace polykv {
namespace {

const char* const kNames[] = {"qwen3moe", "gpt-oss", nullptr};

void fill_experts(const GgufFile& f, const std::string& a, ModelConfig& c) {
  MoeConfig& m = c.moe;
  m.n_expert = int(f.get_u32(a + "expert_count"));
  m.n_used = int(f.get_u32(a + "expert_used_count"));
  m.n_ff_exp = int(f.get_u32(a + "expert_feed_forward_length", uint32_t(c.n_ff)));
  m.n_ff_shexp = int(f.get_u32(a + "expert_shared_feed_forward_length", 0));
  check(m.n_used >= 1 && m.n_used <= m.n_expert, "invalid ", a, "expert_used_count = ", m.n_used, " with ",
        m.n_expert, " experts");
}

void fill(const GgufFile& f, ModelConfig& c) {
  const std::string a = c.arch + ".";
  c.activation = Activation::SiLU;
  c.rope_style = RopeStyle::Neox;
  fill_experts(f, a, c);
  if (c.arch == "qwen3moe") {
    c.qk_norm = true;
    c.moe.gating = MoeGating::SoftmaxTopKRenorm;
    return;
  }
  // gpt-oss
  c.qkv_bias = true;
  c.o_bias = true;
  c.attn_sinks = true;
  c.ffn_norm_tensor = "post_attention_norm";
  c.sliding_window = int(f.get_u32(a + "attention.sliding_window", 128));
  for (int il = 0; il < c.n_layer; ++il) c.layers[size_t(il)].sliding = il % 2 == 0;
  c.moe.gating = MoeGating::TopKSoftmax;
  c.moe.act = MoeActivation::SwiGLUClamped;
  c.moe.router_bias = true;
  c.moe.expert_bias = true;
  c.yarn.truncate = false;  // transformers' gpt-oss: the YaRN correction range is not rounded
}

const ArchFamily kFamily{kNames, fill};

}  // namespace

const ArchFamily& moe_family() { return kFamily; }

}  // namespace polykv
