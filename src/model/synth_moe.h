// synth (model/synth.h) for the mixture-of-experts shapes (ModelShape::n_expert > 0): the tensors and
// metadata keys of qwen3moe and gpt-oss as llama.cpp's converter writes them (the fixtures'
// *.gguf.txt): 3-D expert tensors ffn_{gate,up}_exps [n_embd, n_ff_exp, n_expert] and ffn_down_exps
// [n_ff_exp, n_embd, n_expert] in the requested type, the router ffn_gate_inp [n_embd, n_expert] f32;
// gpt-oss adds router and expert biases, q/k/v/o biases and attn_sinks (f32), post_attention_norm as
// the FFN norm, and the YaRN keys.
#pragma once
#include <vector>

#include "gguf/gguf_writer.h"
#include "model/shapes.h"
#include "model/synth_layout.h"

namespace polykv {

std::vector<SynthTensor> synth_moe_layout(const ModelShape& s, int n_layer);
void add_moe_metadata(GgufWriter& w, const ModelShape& s);

}  // namespace polykv
