// Re-quantizes a GGUF model's weight matrices to another type (the `polykv quantize` command).
#pragma once
#include <string>

#include "core/dtype.h"
#include "quant/weight_mix.h"

namespace polykv {

struct QuantizeReport {
  int n_quantized = 0;   // matrices written in the target type
  int n_fallback = 0;    // matrices whose rows don't fit the type's blocks: written in the fallback type
  int n_kept = 0;        // 1-D tensors (norms, biases) and others copied unchanged
  size_t bytes_in = 0, bytes_out = 0;
};

// Every 2-D tensor becomes `type` (rows not a multiple of its block: `fallback`, q8_0 by default,
// then f16), except that for a ternary type token_embd.weight and output.weight become q4_K (n_quantized
// counts them); other tensors and all metadata are copied; general.file_type is set to the target.
// OUT is written atomically (core/atomic_file.h): on error the old OUT is untouched. Throws Error if
// the type cannot be quantized to, the input is unreadable, or OUT is the input file (or a link to it).
QuantizeReport quantize_model(const std::string& in_path, const std::string& out_path, DType type,
                              DType fallback = DType::Q8_0, int n_threads = 0);
// The same with a weight mix (quant/weight_mix.h: llama.cpp's q4_K_M / q5_K_M) instead of one type: the model's
// <arch>.block_count and <arch>.expert_count place each matrix; general.file_type is the mix's; n_fallback counts
// matrices whose rows did not fit the mix's choice.
QuantizeReport quantize_model(const std::string& in_path, const std::string& out_path, WeightMix mix,
                              int n_threads = 0);

}  // namespace polykv
