#include "model/synth.h"

#include <cstring>

#include "core/error.h"
#include "model/random_fill.h"
#include "model/rope_freqs.h"
#include "model/synth_layout.h"
#include "model/synth_moe.h"
#include "model/synth_qwen35.h"
#include "model/synth_vocab.h"
#include "quant/mxfp4.h"
#include "quant/quant.h"

namespace polykv {
namespace {

// FNV-1a of the tensor name: seeds a tensor independently of its position in the file.
uint64_t name_hash(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

void add_metadata(GgufWriter& w, const ModelShape& s, const SynthOptions& o, int n_layer) {
  const std::string a = s.arch + ".";
  w.set_str("general.architecture", s.arch);
  w.set_str("general.type", "model");
  w.set_str("general.name", "synthetic " + s.name);
  w.set_u32(a + "block_count", uint32_t(n_layer));
  w.set_u32(a + "context_length", uint32_t(s.n_ctx));
  w.set_u32(a + "embedding_length", uint32_t(s.n_embd));
  if (s.arch != "qwen35moe") w.set_u32(a + "feed_forward_length", uint32_t(s.n_ff));  // as the converter
  w.set_u32(a + "attention.head_count", uint32_t(s.n_head));
  w.set_u32(a + "attention.head_count_kv", uint32_t(s.n_head_kv));
  w.set_f32(a + "rope.freq_base", s.rope_theta);
  if (s.rope_theta_swa > 0) w.set_f32(a + "rope.freq_base_swa", s.rope_theta_swa);
  w.set_f32(a + "attention.layer_norm_rms_epsilon", s.rms_eps);
  w.set_u32(a + "attention.key_length", uint32_t(s.head_dim));
  w.set_u32(a + "attention.value_length", uint32_t(s.head_dim));
  if (s.sliding_window > 0) w.set_u32(a + "attention.sliding_window", uint32_t(s.sliding_window));
  if (s.rope_linear_factor > 0) {
    w.set_str(a + "rope.scaling.type", "linear");
    w.set_f32(a + "rope.scaling.factor", s.rope_linear_factor);
  }
  if (o.mix)
    w.set_u32("general.file_type", weight_mix_file_type(*o.mix));
  else if (const int ft = ggml_file_type(o.type); ft >= 0)
    w.set_u32("general.file_type", uint32_t(ft));
  w.set_u32(a + "vocab_size", uint32_t(s.n_vocab));
  if (s.arch == "llama") w.set_u32(a + "rope.dimension_count", uint32_t(s.head_dim));
  if (s.gdn_v_heads > 0)
    add_qwen35_metadata(w, s);
  else if (s.n_expert > 0)
    add_moe_metadata(w, s);
  w.set_u32("general.quantization_version", 2);
  add_synth_tokenizer(w, s.n_vocab);
}

}  // namespace

std::vector<DType> synth_types() {
  std::vector<DType> out;
  for (uint32_t id = 0; id < 256; ++id) {  // ids are < 256 (ptq1_0 is 143)
    const DTypeInfo* info = dtype_info(id);
    if (info && info->weight_type && can_quantize(info->type)) out.push_back(info->type);
  }
  return out;
}

static std::string synth_types_list() {
  std::string valid;
  for (DType t : synth_types()) valid += (valid.empty() ? "" : ", ") + std::string(dtype_name(t));
  return valid;
}

void check_synth_type(DType type) {
  for (DType t : synth_types())
    if (t == type) return;
  fail("type '", dtype_name(type), "' is not supported by synth (quantize_row_ref cannot produce it); valid types: ",
       synth_types_list());
}

DType synth_type_from_name(const std::string& name) {
  DType t;
  try {
    t = dtype_from_name(name);
  } catch (const Error&) {
    fail("unknown type '", name, "'; valid types: ", synth_types_list(), "; weight mixes: ", weight_mix_names());
  }
  check_synth_type(t);
  return t;
}

void set_synth_type(SynthOptions& o, const std::string& name) {
  if (const auto mix = weight_mix_from_name(name)) {
    o.mix = mix;
    o.type = weight_mix_base(*mix);
    return;
  }
  o.mix.reset();
  o.type = synth_type_from_name(name);
}

void add_synth_model(GgufWriter& w, const ModelShape& shape, const SynthOptions& o) {
  check_synth_type(o.type);
  check(shape.n_vocab >= kSynthMinVocab, "shape '", shape.name, "': vocabulary below ", kSynthMinVocab);
  const int n_layer = o.n_layer > 0 ? o.n_layer : shape.n_layer;
  add_metadata(w, shape, o, n_layer);

  const int block = dtype_info(o.type).block_size;
  const std::vector<SynthTensor> layout = synth_tensor_layout(shape, n_layer);
  std::optional<WeightMixPlan> plan;
  if (o.mix) {
    std::vector<std::string> matrices;
    for (const SynthTensor& t : layout)
      if (t.init == SynthInit::Weight) matrices.push_back(t.name);
    plan.emplace(*o.mix, matrices, n_layer, shape.n_expert);
  }
  for (const SynthTensor& t : layout) {
    int64_t rows = 1;
    for (size_t d = 1; d < t.ne.size(); ++d) rows *= t.ne[d];
    RandomFill fill;
    fill.ne0 = t.ne[0];
    fill.rows = rows;
    fill.seed = mix64(o.seed) ^ name_hash(t.name);
    fill.n_threads = o.n_threads;
    switch (t.init) {
      case SynthInit::Weight:
        if (plan) {  // the mix's type, after llama-quantize's fallback for rows that do not fit it
          fill.type = plan->type_of(t.name, t.ne[0]);
          fill.stddev = o.weight_std;
          break;
        }
        check(t.ne[0] % block == 0, "shape '", shape.name, "': ", t.name, " has rows of ", t.ne[0],
              " values, not a multiple of ", dtype_name(o.type), "'s block of ", block);
        // mxfp4 is llama.cpp's MXFP4_MOE: experts in mxfp4, the other matrices in q8_0 (quant/mxfp4.h).
        fill.type = o.type == DType::MXFP4 ? mxfp4_moe_type(t.ne.size() == 3) : o.type;
        fill.stddev = o.weight_std;
        break;
      case SynthInit::WeightF32:
        fill.stddev = o.weight_std;
        break;
      case SynthInit::Norm:
        fill.mean = 1.0f;
        fill.stddev = 0.01f;
        break;
      case SynthInit::Bias:
        fill.stddev = o.weight_std;
        break;
      case SynthInit::Decay:
        fill.mean = -1.0f;
        fill.stddev = 0.1f;
        break;
      case SynthInit::RopeFreqs: {
        const auto freqs = llama3_rope_freqs(shape.llama3_rope, shape.rope_theta, shape.head_dim);
        w.add_tensor(t.name, DType::F32, t.ne, [freqs](uint8_t* dst, size_t n) {
          std::memcpy(dst, freqs.data(), n);  // n == 4 * freqs.size() by the layout
        });
        continue;
      }
    }
    w.add_tensor(t.name, fill.type, t.ne, [fill](uint8_t* dst, size_t n) { fill_random(fill, dst, n); });
  }
}

void write_synth_model(const std::string& path, const ModelShape& shape, const SynthOptions& opts) {
  GgufWriter w;
  add_synth_model(w, shape, opts);
  w.write(path);
}

}  // namespace polykv
