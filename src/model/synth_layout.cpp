#include "model/synth_layout.h"

#include "core/error.h"
#include "model/synth_moe.h"
#include "model/synth_qwen35.h"

namespace polykv {

std::vector<SynthTensor> synth_tensor_layout(const ModelShape& s, int n_layer) {
  if (n_layer <= 0) n_layer = s.n_layer;
  if (s.gdn_v_heads > 0) return synth_qwen35_layout(s, n_layer);
  if (s.n_expert > 0) return synth_moe_layout(s, n_layer);
  const int64_t embd = s.n_embd, ff = s.n_ff, vocab = s.n_vocab;
  const int64_t q_dim = int64_t(s.n_head) * s.head_dim, kv_dim = int64_t(s.n_head_kv) * s.head_dim;
  const bool gemma3 = s.arch == "gemma3";
  const bool head_norms = gemma3 || s.arch == "qwen3";  // attn_q_norm, attn_k_norm: [head_dim]
  check(s.arch == "llama" || s.arch == "qwen2" || s.arch == "qwen3" || gemma3, "synth: unsupported architecture '",
        s.arch, "'");

  std::vector<SynthTensor> t;
  auto add = [&](std::string name, std::vector<int64_t> ne, SynthInit init) {
    t.push_back({std::move(name), std::move(ne), init});
  };
  if (s.llama3_rope.factor > 0) add("rope_freqs.weight", {s.head_dim / 2}, SynthInit::RopeFreqs);
  if (!s.tied_embeddings && s.arch == "llama") add("output.weight", {embd, vocab}, SynthInit::Weight);
  add("token_embd.weight", {embd, vocab}, SynthInit::Weight);
  for (int l = 0; l < n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    add(b + "attn_norm.weight", {embd}, SynthInit::Norm);
    add(b + "ffn_down.weight", {ff, embd}, SynthInit::Weight);
    add(b + "ffn_gate.weight", {embd, ff}, SynthInit::Weight);
    add(b + "ffn_up.weight", {embd, ff}, SynthInit::Weight);
    if (gemma3) {
      add(b + "post_attention_norm.weight", {embd}, SynthInit::Norm);
      add(b + "post_ffw_norm.weight", {embd}, SynthInit::Norm);
    }
    add(b + "ffn_norm.weight", {embd}, SynthInit::Norm);
    if (s.qkv_bias) add(b + "attn_k.bias", {kv_dim}, SynthInit::Bias);
    if (head_norms) add(b + "attn_k_norm.weight", {s.head_dim}, SynthInit::Norm);
    add(b + "attn_k.weight", {embd, kv_dim}, SynthInit::Weight);
    add(b + "attn_output.weight", {q_dim, embd}, SynthInit::Weight);
    if (s.qkv_bias) add(b + "attn_q.bias", {q_dim}, SynthInit::Bias);
    if (head_norms) add(b + "attn_q_norm.weight", {s.head_dim}, SynthInit::Norm);
    add(b + "attn_q.weight", {embd, q_dim}, SynthInit::Weight);
    if (s.qkv_bias) add(b + "attn_v.bias", {kv_dim}, SynthInit::Bias);
    add(b + "attn_v.weight", {embd, kv_dim}, SynthInit::Weight);
  }
  add("output_norm.weight", {embd}, SynthInit::Norm);
  if (!s.tied_embeddings && s.arch != "llama") add("output.weight", {embd, vocab}, SynthInit::Weight);
  return t;
}

}  // namespace polykv
