// Weight mixes: one type per weight matrix, chosen by the matrix's role and layer, for `polykv quantize` and
// `polykv synth`. The mixes are llama.cpp's K-quant "_M" file types, so that a file made here has the layout of the
// files people download (Q4_K_M is the most common GGUF quantization). The rule below restates what llama-quantize
// does for them (read in llama.cpp's src/llama-quant.cpp at 3f545bec; no code taken):
//
//   q4_K_M (general.file_type 15) / q5_K_M (17): every quantized matrix q4_K / q5_K, except
//   - the output projection q6_K: output.weight, or token_embd.weight when the file has no output.weight (tied);
//   - attention V q6_K in the layers that get more bits: attn_v, attn_qkv and attn_kv_b matrices are counted in file
//     order (i = 0 .. n-1, n = how many there are) and take q6_K where more_bits(i, n);
//   - FFN down q6_K where more_bits(layer, block_count) (ffn_down, ffn_down_exps, ffn_down_shexp; layer from the
//     tensor's "blk.N." name);
//   - q4_K_M with exactly 8 experts: attn_output q5_K.
//   more_bits(i, n) = i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2 (integer division, C++'s % of a negative value).
//   Rows that are not a multiple of the type's 256-value block fall back as llama-quantize's do: q4_K -> q5_0,
//   q5_K -> q5_1, q6_K -> q8_0, and f16 if that does not fit either.
// Not reproduced: llama-quantize's 70B rule (attn_v q5_K in every layer of a 70B Llama, where 8 heads share attn_v),
// its Falcon rules, imatrix-dependent choices and per-tensor overrides.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace polykv {

enum class WeightMix { Q4_K_M, Q5_K_M };

// "q4_K_M" / "q5_K_M" (case-insensitive); nullopt for any other name (a plain type, or nothing valid).
std::optional<WeightMix> weight_mix_from_name(const std::string& name);
const char* weight_mix_name(WeightMix m);
// "q4_K_M, q5_K_M": for help texts and error messages.
std::string weight_mix_names();
DType weight_mix_base(WeightMix m);  // q4_K / q5_K
uint32_t weight_mix_file_type(WeightMix m);  // general.file_type: 15 / 17

// llama-quantize's choice for a matrix whose rows do not fit `type`'s blocks (above), then f16.
DType k_quant_fallback(DType type, int64_t row_len);

// The mix's choice for every matrix of one model. Built from the names of the matrices to be quantized, in file
// order, and the model's block_count and expert_count (0 for dense models).
class WeightMixPlan {
 public:
  WeightMixPlan(WeightMix mix, const std::vector<std::string>& matrix_names, int n_layer, int n_expert);
  // The type of matrix `name` with rows of `row_len` values (after the fallback). Throws Error for a name that was not
  // among the matrix names given to the constructor.
  DType type_of(const std::string& name, int64_t row_len) const;
  // The mix's type for `name` before the fallback (same Error).
  DType planned_type(const std::string& name) const;

 private:
  WeightMix mix_;
  std::vector<std::string> names_;
  std::vector<DType> types_;  // [names_.size()] before the fallback
};

}  // namespace polykv
