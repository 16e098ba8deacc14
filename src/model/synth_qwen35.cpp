#include "model/synth_qwen35.h"

#include "core/error.h"

namespace polykv {

std::vector<SynthTensor> synth_qwen35_layout(const ModelShape& s, int n_layer) {
  const bool moe = s.arch == "qwen35moe";
  check(moe || s.arch == "qwen35", "synth: unsupported hybrid architecture '", s.arch, "'");
  check(s.full_attention_interval > 0 && s.gdn_k_heads > 0 && s.gdn_v_heads % s.gdn_k_heads == 0,
        "synth: shape '", s.name, "' has an invalid Gated DeltaNet configuration");
  const int64_t embd = s.n_embd, vocab = s.n_vocab, d = s.gdn_head_dim;
  const int64_t key_dim = int64_t(s.gdn_k_heads) * d, value_dim = int64_t(s.gdn_v_heads) * d;
  const int64_t conv_dim = 2 * key_dim + value_dim;
  const int64_t q_dim = int64_t(s.n_head) * s.head_dim, kv_dim = int64_t(s.n_head_kv) * s.head_dim;
  std::vector<SynthTensor> t;
  auto add = [&](std::string name, std::vector<int64_t> ne, SynthInit init) {
    t.push_back({std::move(name), std::move(ne), init});
  };
  add("token_embd.weight", {embd, vocab}, SynthInit::Weight);
  for (int l = 0; l < n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    const bool gdn = (l + 1) % s.full_attention_interval != 0;
    add(b + "attn_norm.weight", {embd}, SynthInit::Norm);
    if (gdn) {
      add(b + "ssm_a", {s.gdn_v_heads}, SynthInit::Decay);
      add(b + "ssm_conv1d.weight", {s.gdn_conv_kernel, conv_dim}, SynthInit::WeightF32);
      add(b + "ssm_dt.bias", {s.gdn_v_heads}, SynthInit::Bias);
      add(b + "ssm_alpha.weight", {embd, s.gdn_v_heads}, SynthInit::Weight);
      add(b + "ssm_beta.weight", {embd, s.gdn_v_heads}, SynthInit::Weight);
      add(b + "attn_qkv.weight", {embd, conv_dim}, SynthInit::Weight);
      add(b + "attn_gate.weight", {embd, value_dim}, SynthInit::Weight);
      add(b + "ssm_norm.weight", {d}, SynthInit::Norm);
      add(b + "ssm_out.weight", {value_dim, embd}, SynthInit::Weight);
    }
    if (moe) {
      add(b + "ffn_down_exps.weight", {s.n_ff_exp, embd, s.n_expert}, SynthInit::Weight);
      add(b + "ffn_gate_exps.weight", {embd, s.n_ff_exp, s.n_expert}, SynthInit::Weight);
      add(b + "ffn_up_exps.weight", {embd, s.n_ff_exp, s.n_expert}, SynthInit::Weight);
      add(b + "ffn_gate_inp.weight", {embd, s.n_expert}, SynthInit::WeightF32);
      add(b + "ffn_down_shexp.weight", {s.n_ff_shexp, embd}, SynthInit::Weight);
      add(b + "ffn_gate_shexp.weight", {embd, s.n_ff_shexp}, SynthInit::Weight);
      add(b + "ffn_up_shexp.weight", {embd, s.n_ff_shexp}, SynthInit::Weight);
      add(b + "ffn_gate_inp_shexp.weight", {embd, 1}, SynthInit::WeightF32);
    } else {
      add(b + "ffn_down.weight", {s.n_ff, embd}, SynthInit::Weight);
      add(b + "ffn_gate.weight", {embd, s.n_ff}, SynthInit::Weight);
      add(b + "ffn_up.weight", {embd, s.n_ff}, SynthInit::Weight);
    }
    add(b + "post_attention_norm.weight", {embd}, SynthInit::Norm);
    if (!gdn) {
      add(b + "attn_k_norm.weight", {s.head_dim}, SynthInit::Norm);
      add(b + "attn_k.weight", {embd, kv_dim}, SynthInit::Weight);
      add(b + "attn_output.weight", {q_dim, embd}, SynthInit::Weight);
      add(b + "attn_q_norm.weight", {s.head_dim}, SynthInit::Norm);
      add(b + "attn_q.weight", {embd, 2 * q_dim}, SynthInit::Weight);
      add(b + "attn_v.weight", {embd, kv_dim}, SynthInit::Weight);
    }
  }
  add("output_norm.weight", {embd}, SynthInit::Norm);
  if (!s.tied_embeddings) add("output.weight", {embd, vocab}, SynthInit::Weight);
  return t;
}

void add_qwen35_metadata(GgufWriter& w, const ModelShape& s) {
  const std::string a = s.arch + ".";
  w.set_u32(a + "ssm.conv_kernel", uint32_t(s.gdn_conv_kernel));
  w.set_u32(a + "ssm.state_size", uint32_t(s.gdn_head_dim));
  w.set_u32(a + "ssm.group_count", uint32_t(s.gdn_k_heads));
  w.set_u32(a + "ssm.time_step_rank", uint32_t(s.gdn_v_heads));
  w.set_u32(a + "ssm.inner_size", uint32_t(s.gdn_v_heads * s.gdn_head_dim));
  w.set_u32(a + "full_attention_interval", uint32_t(s.full_attention_interval));
  w.set_u32(a + "rope.dimension_count", uint32_t(s.n_rot));
  // M-RoPE sections over the n_rot / 2 rotary pairs, as the converter writes them (Qwen3.5: [11, 11,
  // 10, 0] of 32); for text every position id is the same, so only their sum matters.
  const int half = s.n_rot / 2;
  w.set_i32_array(a + "rope.dimension_sections", {(half + 2) / 3, (half + 1) / 3, half / 3, 0});
  if (s.arch == "qwen35moe") {
    w.set_u32(a + "expert_count", uint32_t(s.n_expert));
    w.set_u32(a + "expert_used_count", uint32_t(s.n_expert_used));
    w.set_u32(a + "expert_feed_forward_length", uint32_t(s.n_ff_exp));
    w.set_u32(a + "expert_shared_feed_forward_length", uint32_t(s.n_ff_shexp));
  }
}

}  // namespace polykv
