// synth (model/synth.h) for the Qwen3.5 hybrids (ModelShape::gdn_v_heads > 0; arch "qwen35" dense,
// "qwen35moe" with routed + shared experts): the tensors and metadata keys as llama.cpp's converter
// writes them (the fixtures' qwen35*.gguf.txt). Layer il is a Gated DeltaNet iff
// (il + 1) % full_attention_interval != 0:
//   GDN:       attn_qkv [E, 2·Hk·d + Hv·d], attn_gate [E, Hv·d], ssm_alpha / ssm_beta [E, Hv],
//              ssm_out [Hv·d, E] in the requested type; ssm_conv1d [K, 2·Hk·d + Hv·d], ssm_dt.bias [Hv],
//              ssm_a [Hv] (negative: a decay), ssm_norm [d] f32;
//   attention: attn_q [E, 2·H·hd] (per head [query | output gate]), attn_k / attn_v [E, Hkv·hd],
//              attn_output [H·hd, E], attn_q_norm / attn_k_norm [hd] f32;
//   FFN:       ffn_{gate,up,down} (qwen35) or the qwen3moe expert stacks + router f32 + shared expert
//              ffn_{gate,up,down}_shexp and its gate ffn_gate_inp_shexp [E, 1] f32 (qwen35moe);
//   norms:     attn_norm, post_attention_norm (the FFN's pre-norm), output_norm.
// No MTP block (nextn_predict_layers is not written: block_count is the main model).
#pragma once
#include <vector>

#include "gguf/gguf_writer.h"
#include "model/shapes.h"
#include "model/synth_layout.h"

namespace polykv {

std::vector<SynthTensor> synth_qwen35_layout(const ModelShape& s, int n_layer);
// The ssm.* keys, full_attention_interval, rope.dimension_count / dimension_sections, and the expert
// keys of qwen35moe.
void add_qwen35_metadata(GgufWriter& w, const ModelShape& s);

}  // namespace polykv
