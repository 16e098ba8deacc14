// Random-weight GGUF models shaped like real ones (model/shapes.h), for benchmarks and tests when
// the real weights are not at hand. Metadata keys, tensor names and tensor order follow the real
// converter; weights are N(0, 0.02) quantized with quantize_row_ref to the requested type, 1-D
// norms (1 + N(0, 0.01)), biases and rope_freqs are f32 as in real files. The tokenizer is the
// synthetic one of model/synth_vocab.h.
//
// Memory: tensors are produced one at a time by GgufWriter generators, so peak memory is about the
// largest single tensor (the embedding matrix), not the model. Output is a function of (shape,
// n_layer, type, seed) only, whatever the thread count; tensor data is seeded by (seed, tensor name),
// so blk.N is the same for any --layers value.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "gguf/gguf_writer.h"
#include "model/shapes.h"
#include "quant/weight_mix.h"

namespace polykv {

struct SynthOptions {
  DType type = DType::F16;  // type of the matrices
  std::optional<WeightMix> mix;  // when set, the matrices' types come from this mix (quant/weight_mix.h), not `type`
  uint64_t seed = 0;
  int n_layer = 0;          // <= 0: the shape's own
  int n_threads = 0;        // <= 0: hardware concurrency
  float weight_std = 0.02f;
};

// Types synth can write matrices in: weight types that quantize_row_ref supports.
std::vector<DType> synth_types();
// Throws Error naming the type and listing synth_types() unless `type` is one of them.
void check_synth_type(DType type);

// Parses a type name (case-insensitive) and checks it as above; unknown names also list the valid ones.
DType synth_type_from_name(const std::string& name);
// Sets o.type, or o.mix for a weight mix's name (q4_K_M, q5_K_M); the same errors, listing the mixes too.
void set_synth_type(SynthOptions& o, const std::string& name);

// Adds the metadata and tensor generators to w. The generators capture everything by value.
void add_synth_model(GgufWriter& w, const ModelShape& shape, const SynthOptions& opts);

// add_synth_model + write to path.
void write_synth_model(const std::string& path, const ModelShape& shape, const SynthOptions& opts);

}  // namespace polykv
