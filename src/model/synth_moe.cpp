#include "model/synth_moe.h"

#include "core/error.h"

namespace polykv {

std::vector<SynthTensor> synth_moe_layout(const ModelShape& s, int n_layer) {
  const bool oss = s.arch == "gpt-oss";
  check(oss || s.arch == "qwen3moe", "synth: unsupported mixture-of-experts architecture '", s.arch, "'");
  const int64_t embd = s.n_embd, vocab = s.n_vocab, ne = s.n_expert, ff = s.n_ff_exp;
  const int64_t q_dim = int64_t(s.n_head) * s.head_dim, kv_dim = int64_t(s.n_head_kv) * s.head_dim;
  std::vector<SynthTensor> t;
  auto add = [&](std::string name, std::vector<int64_t> ne_, SynthInit init) {
    t.push_back({std::move(name), std::move(ne_), init});
  };
  if (oss) add("output.weight", {embd, vocab}, SynthInit::Weight);
  add("token_embd.weight", {embd, vocab}, SynthInit::Weight);
  for (int l = 0; l < n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    add(b + "attn_norm.weight", {embd}, SynthInit::Norm);
    add(b + "ffn_down_exps.weight", {ff, embd, ne}, SynthInit::Weight);
    if (oss) add(b + "ffn_down_exps.bias", {embd, ne}, SynthInit::Bias);
    add(b + "ffn_gate_exps.weight", {embd, ff, ne}, SynthInit::Weight);
    add(b + "ffn_up_exps.weight", {embd, ff, ne}, SynthInit::Weight);
    if (oss) {
      add(b + "ffn_gate_exps.bias", {ff, ne}, SynthInit::Bias);
      add(b + "ffn_up_exps.bias", {ff, ne}, SynthInit::Bias);
      add(b + "ffn_gate_inp.bias", {ne}, SynthInit::Bias);
    }
    add(b + "ffn_gate_inp.weight", {embd, ne}, SynthInit::WeightF32);
    add(b + (oss ? "post_attention_norm.weight" : "ffn_norm.weight"), {embd}, SynthInit::Norm);
    if (oss) add(b + "attn_k.bias", {kv_dim}, SynthInit::Bias);
    if (!oss) add(b + "attn_k_norm.weight", {s.head_dim}, SynthInit::Norm);
    add(b + "attn_k.weight", {embd, kv_dim}, SynthInit::Weight);
    if (oss) add(b + "attn_output.bias", {embd}, SynthInit::Bias);
    add(b + "attn_output.weight", {q_dim, embd}, SynthInit::Weight);
    if (oss) add(b + "attn_q.bias", {q_dim}, SynthInit::Bias);
    if (!oss) add(b + "attn_q_norm.weight", {s.head_dim}, SynthInit::Norm);
    add(b + "attn_q.weight", {embd, q_dim}, SynthInit::Weight);
    if (oss) add(b + "attn_sinks.weight", {s.n_head}, SynthInit::Bias);
    if (oss) add(b + "attn_v.bias", {kv_dim}, SynthInit::Bias);
    add(b + "attn_v.weight", {embd, kv_dim}, SynthInit::Weight);
  }
  add("output_norm.weight", {embd}, SynthInit::Norm);
  if (!oss) add("output.weight", {embd, vocab}, SynthInit::Weight);  // Qwen3-30B-A3B is untied
  return t;
}

void add_moe_metadata(GgufWriter& w, const ModelShape& s) {
  const std::string a = s.arch + ".";
  w.set_u32(a + "expert_count", uint32_t(s.n_expert));
  w.set_u32(a + "expert_used_count", uint32_t(s.n_expert_used));
  w.set_u32(a + "expert_feed_forward_length", uint32_t(s.n_ff_exp));
  if (s.yarn_factor > 0) {
    w.set_str(a + "rope.scaling.type", "yarn");
    w.set_f32(a + "rope.scaling.factor", s.yarn_factor);
    w.set_u32(a + "rope.scaling.original_context_length", uint32_t(s.yarn_orig_ctx));
    w.set_f32(a + "rope.scaling.yarn_beta_fast", 32.0f);
    w.set_f32(a + "rope.scaling.yarn_beta_slow", 1.0f);
  }
}

}  // namespace polykv
