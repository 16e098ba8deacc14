#include "quant/weight_mix.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"

namespace polykv {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// llama-quantize's use_more_bits: the first and last eighths of the layers, and every third layer between them.
bool more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// The layer of a "blk.N.*" name; -1 for any other name.
int layer_of(const std::string& name) {
  if (name.compare(0, 4, "blk.") != 0) return -1;
  int layer = 0;
  size_t i = 4;
  if (i >= name.size() || !std::isdigit(static_cast<unsigned char>(name[i]))) return -1;
  for (; i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])); ++i) {
    layer = layer * 10 + (name[i] - '0');
    if (layer > 1000000) return -1;
  }
  return i < name.size() && name[i] == '.' ? layer : -1;
}

bool is_attn_v_like(const std::string& n) {
  return has(n, "attn_v.weight") || has(n, "attn_qkv.weight") || has(n, "attn_kv_b.weight");
}

}  // namespace

std::optional<WeightMix> weight_mix_from_name(const std::string& name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  if (lower == "q4_k_m") return WeightMix::Q4_K_M;
  if (lower == "q5_k_m") return WeightMix::Q5_K_M;
  return std::nullopt;
}

const char* weight_mix_name(WeightMix m) { return m == WeightMix::Q4_K_M ? "q4_K_M" : "q5_K_M"; }
std::string weight_mix_names() { return "q4_K_M, q5_K_M"; }
DType weight_mix_base(WeightMix m) { return m == WeightMix::Q4_K_M ? DType::Q4_K : DType::Q5_K; }
uint32_t weight_mix_file_type(WeightMix m) { return m == WeightMix::Q4_K_M ? 15u : 17u; }

DType k_quant_fallback(DType type, int64_t row_len) {
  const auto fits = [&](DType d) { return row_len % dtype_info(d).block_size == 0; };
  if (fits(type)) return type;
  DType next = DType::F16;
  switch (type) {
    case DType::Q4_K: next = DType::Q5_0; break;
    case DType::Q5_K: next = DType::Q5_1; break;
    case DType::Q6_K: next = DType::Q8_0; break;
    default: break;
  }
  return fits(next) ? next : DType::F16;
}

WeightMixPlan::WeightMixPlan(WeightMix mix, const std::vector<std::string>& matrix_names, int n_layer, int n_expert)
    : mix_(mix), names_(matrix_names), types_(matrix_names.size(), weight_mix_base(mix)) {
  check(n_layer > 0, "weight mix ", weight_mix_name(mix), ": the model has no layers (block_count ", n_layer, ")");
  const bool tied = std::find(names_.begin(), names_.end(), "output.weight") == names_.end();
  const int n_attn_v = int(std::count_if(names_.begin(), names_.end(), is_attn_v_like));
  int i_attn_v = 0;
  for (size_t k = 0; k < names_.size(); ++k) {
    const std::string& n = names_[k];
    DType& t = types_[k];
    if (n == "output.weight" || (tied && n == "token_embd.weight")) {
      t = DType::Q6_K;
    } else if (is_attn_v_like(n)) {
      if (more_bits(i_attn_v, n_attn_v)) t = DType::Q6_K;
      ++i_attn_v;
    } else if (has(n, "ffn_down") && ends_with(n, ".weight")) {
      const int layer = layer_of(n);
      check(layer >= 0 && layer < n_layer, "weight mix ", weight_mix_name(mix), ": tensor ", n,
            " names no layer below block_count ", n_layer);
      if (more_bits(layer, n_layer)) t = DType::Q6_K;
    } else if (has(n, "attn_output.weight") && mix == WeightMix::Q4_K_M && n_expert == 8) {
      t = DType::Q5_K;
    }
  }
}

DType WeightMixPlan::planned_type(const std::string& name) const {
  const auto it = std::find(names_.begin(), names_.end(), name);
  check(it != names_.end(), "weight mix ", weight_mix_name(mix_), ": no plan for tensor ", name);
  return types_[size_t(it - names_.begin())];
}

DType WeightMixPlan::type_of(const std::string& name, int64_t row_len) const {
  return k_quant_fallback(planned_type(name), row_len);
}

}  // namespace polykv
