#include "quant/quantize_model.h"

#include <thread>
#include <utility>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "quant/mxfp4.h"
#include "quant/quant.h"
#include "quant/ternary.h"
#include "quant/weight_mix.h"

namespace polykv {
namespace {

// The tensors quantized: weight matrices (2-D) and stacks of expert matrices (3-D, each row on its own),
// but not the MoE routers (ffn_gate_inp, ffn_gate_inp_shexp: kept as stored, f32 in real files, as
// llama.cpp keeps them) nor biases (attn_*.bias, the 2-D ffn_*_exps.bias).
bool quantizable(const GgufTensor& t) {
  const std::string& n = t.name;
  const bool is_weight = n.size() > 7 && n.compare(n.size() - 7, 7, ".weight") == 0;
  return (t.ne.size() == 2 || t.ne.size() == 3) && dtype_info(t.type).weight_type && is_weight &&
         n.find("ffn_gate_inp") == std::string::npos;
}

// The type a matrix is written in for a target `type`: ternary targets keep the embeddings and the
// output projection in q4_K as llama.cpp's quantizer does for TQ1_0 / TQ2_0 (ternary there costs
// far more quality than it saves bytes); an mxfp4 target is llama.cpp's MXFP4_MOE file type (as real
// gpt-oss GGUFs): the expert stacks (3-D) in mxfp4, every other matrix in q8_0 (mxfp4_moe_type);
// every other matrix gets `type`.
DType target_for(const GgufTensor& t, DType type) {
  if (is_ternary(type) && (t.name == "token_embd.weight" || t.name == "output.weight")) return DType::Q4_K;
  if (type == DType::MXFP4) return mxfp4_moe_type(t.ne.size() == 3);
  return type;
}

std::vector<std::string> quantizable_matrix_names(const GgufFile& in) {
  std::vector<std::string> names;
  for (const GgufTensor& t : in.tensors())
    if (quantizable(t)) names.push_back(t.name);
  return names;
}

// Writes OUT with every tensor of IN, the quantizable ones in choose(t) = {type, whether it is a fallback}, and
// general.file_type = file_type when >= 0.
template <class Choose>
QuantizeReport quantize_tensors(const GgufFile& in, const std::string& out_path, int file_type, int n_threads,
                                const Choose& choose) {
  GgufWriter w;
  for (const auto& [k, v] : in.metadata())
    if (k != "general.alignment") w.set(k, v);
  if (file_type >= 0) w.set_u32("general.file_type", uint32_t(file_type));
  auto pool = std::make_shared<ThreadPool>(n_threads);
  QuantizeReport r;
  for (const GgufTensor& t : in.tensors()) {
    r.bytes_in += t.n_bytes;
    DType target = t.type;
    if (quantizable(t)) {
      const auto [type, fallback] = choose(t);
      target = type;
      (fallback ? r.n_fallback : r.n_quantized)++;
    } else {
      r.n_kept++;
    }
    if (target == t.type) {
      w.add_tensor(t.name, t.type, t.ne, t.data);
      r.bytes_out += t.n_bytes;
      continue;
    }
    const int64_t n_in = t.ne[0], rows = t.rows();
    const size_t in_row = row_bytes(t.type, n_in), out_row = row_bytes(target, n_in);
    r.bytes_out += out_row * size_t(rows);
    const GgufTensor* src = &t;
    w.add_tensor(t.name, target, t.ne, [=](uint8_t* dst, size_t) {
      pool->parallel_for(rows, [&](int64_t b, int64_t e) {
        std::vector<float> row(static_cast<size_t>(n_in));
        for (int64_t i = b; i < e; ++i) {
          dequantize_row_ref(src->type, src->data + size_t(i) * in_row, row.data(), n_in);
          quantize_row_ref(target, row.data(), dst + size_t(i) * out_row, n_in);
        }
      });
    });
  }
  w.write(out_path);
  return r;
}

}  // namespace

QuantizeReport quantize_model(const std::string& in_path, const std::string& out_path, DType type, DType fallback,
                              int n_threads) {
  check(can_quantize(type), "polykv cannot quantize to ", dtype_name(type));
  check(can_quantize(fallback), "polykv cannot quantize to ", dtype_name(fallback));
  check_not_input(out_path, in_path);  // the input stays mapped while the output is written
  const GgufFile in = GgufFile::open(in_path);
  return quantize_tensors(in, out_path, ggml_file_type(type), n_threads, [&](const GgufTensor& t) {
    const auto fits = [&](DType d) { return t.ne[0] % dtype_info(d).block_size == 0; };
    const DType want = target_for(t, type);
    const DType got = fits(want) ? want : fits(fallback) ? fallback : DType::F16;
    return std::pair<DType, bool>{got, got != want};
  });
}

QuantizeReport quantize_model(const std::string& in_path, const std::string& out_path, WeightMix mix, int n_threads) {
  check_not_input(out_path, in_path);
  const GgufFile in = GgufFile::open(in_path);
  const std::string arch = in.get_str("general.architecture");
  const WeightMixPlan plan(mix, quantizable_matrix_names(in), int(in.get_u32(arch + ".block_count")),
                           int(in.get_u32(arch + ".expert_count", 0)));
  return quantize_tensors(in, out_path, int(weight_mix_file_type(mix)), n_threads, [&](const GgufTensor& t) {
    const DType got = plan.type_of(t.name, t.ne[0]);
    return std::pair<DType, bool>{got, got != plan.planned_type(t.name)};
  });
}

}  // namespace polykv
