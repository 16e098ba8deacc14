#include "model/moe_weights.h"

#include "core/error.h"
#include "model/weights.h"
#include "quant/quant.h"

namespace polykv {
namespace {

size_t bytes(const WeightMatrix& w) { return w.row_stride * size_t(w.n_out); }

void check_weight_type(const GgufTensor& t) {
  check(dtype_info(t.type).weight_type, "tensor '", t.name, "' has type ", dtype_name(t.type),
        ", which polykv cannot use as a weight");
}

// A [n_out][n_in] matrix at `data` in t's type, packed (and its original released) for the CPU.
WeightMatrix slice(const GgufFile& f, const GgufTensor& t, const uint8_t* data, int64_t n_in, int64_t n_out,
                   bool pack) {
  WeightMatrix w;
  w.type = t.type;
  w.data = data;
  w.n_in = n_in;
  w.n_out = n_out;
  w.row_stride = row_bytes(t.type, n_in);
  if (pack) {
    pack_for_matmul(w);
    release_unread_original(f, w);
  }
  return w;
}

// A 2-D tensor ne = [n_in, n_out] (a trailing 1 may be absent).
WeightMatrix matrix2(const GgufFile& f, const std::string& name, int64_t n_in, int64_t n_out, bool pack) {
  const GgufTensor& t = f.tensor(name);
  const bool ok = t.ne.size() <= 2 && t.ne[0] == n_in && (t.ne.size() == 2 ? t.ne[1] : 1) == n_out;
  check(ok, "tensor '", name, "' has ", t.ne.size(), " dims / ", t.n_elements, " values, expected [", n_in, ", ",
        n_out, "]");
  check_weight_type(t);
  return slice(f, t, static_cast<const uint8_t*>(t.data), n_in, n_out, pack);
}

// The n_expert [n_out][n_in] slices of a 3-D tensor ne = [n_in, n_out, n_expert].
std::vector<WeightMatrix> experts(const GgufFile& f, const std::string& name, int64_t n_in, int64_t n_out,
                                  int n_expert, bool pack) {
  const GgufTensor& t = f.tensor(name);
  check(t.ne.size() == 3 && t.ne[0] == n_in && t.ne[1] == n_out && t.ne[2] == n_expert, "tensor '", name,
        "' has the wrong shape: expected [", n_in, ", ", n_out, ", ", n_expert, "]");
  check_weight_type(t);
  const size_t stride = row_bytes(t.type, n_in) * size_t(n_out);
  std::vector<WeightMatrix> out;
  for (int e = 0; e < n_expert; ++e)
    out.push_back(slice(f, t, static_cast<const uint8_t*>(t.data) + size_t(e) * stride, n_in, n_out, pack));
  return out;
}

std::vector<float> floats(const GgufFile& f, const std::string& name, int64_t n) {
  const GgufTensor& t = f.tensor(name);
  check(t.n_elements == n, "tensor '", name, "' has ", t.n_elements, " values, expected ", n);
  check_weight_type(t);
  std::vector<float> out(static_cast<size_t>(n));
  dequantize_row_ref(t.type, t.data, out.data(), n);
  return out;
}

}  // namespace

MoeLayerWeights bind_moe_weights(const GgufFile& f, const ModelConfig& c, const std::string& p, bool pack) {
  const MoeConfig& m = c.moe;
  const int E = c.n_embd, F = m.n_ff_exp, ne = m.n_expert;
  MoeLayerWeights w;
  w.router = matrix2(f, p + "ffn_gate_inp.weight", E, ne, pack);
  if (m.router_bias) w.router_bias = floats(f, p + "ffn_gate_inp.bias", ne);
  w.gate = experts(f, p + "ffn_gate_exps.weight", E, F, ne, pack);
  w.up = experts(f, p + "ffn_up_exps.weight", E, F, ne, pack);
  w.down = experts(f, p + "ffn_down_exps.weight", F, E, ne, pack);
  if (m.expert_bias) {
    w.gate_bias = floats(f, p + "ffn_gate_exps.bias", int64_t(ne) * F);
    w.up_bias = floats(f, p + "ffn_up_exps.bias", int64_t(ne) * F);
    w.down_bias = floats(f, p + "ffn_down_exps.bias", int64_t(ne) * E);
  }
  if (m.n_ff_shexp > 0) {
    w.sh_gate = matrix2(f, p + "ffn_gate_shexp.weight", E, m.n_ff_shexp, pack);
    w.sh_up = matrix2(f, p + "ffn_up_shexp.weight", E, m.n_ff_shexp, pack);
    w.sh_down = matrix2(f, p + "ffn_down_shexp.weight", m.n_ff_shexp, E, pack);
    w.sh_gate_inp = matrix2(f, p + "ffn_gate_inp_shexp.weight", E, 1, pack);
  }
  return w;
}

DeviceMoeWeights upload_moe_weights(Backend& be, const MoeLayerWeights& w, const ModelConfig& c) {
  auto fl = [&](const std::vector<float>& v) -> const float* { return v.empty() ? nullptr : be.upload_floats(v); };
  auto mats = [&](const std::vector<WeightMatrix>& v) { return be.upload_experts(v); };
  auto mat = [&](const WeightMatrix& m) { return m.n_out > 0 ? be.upload_matrix(m) : WeightMatrix{}; };
  DeviceMoeWeights d;
  d.router = be.upload_matrix(w.router);
  d.router_bias = fl(w.router_bias);
  MoeExperts& x = d.experts;
  x.n_embd = c.n_embd;
  x.n_ff = c.moe.n_ff_exp;
  x.gate = mats(w.gate);
  x.up = mats(w.up);
  x.down = mats(w.down);
  x.gate_bias = fl(w.gate_bias);
  x.up_bias = fl(w.up_bias);
  x.down_bias = fl(w.down_bias);
  x.act = c.moe.act;
  x.alpha = c.moe.alpha;
  x.limit = c.moe.limit;
  d.sh_gate = mat(w.sh_gate);
  d.sh_up = mat(w.sh_up);
  d.sh_down = mat(w.sh_down);
  d.sh_gate_inp = mat(w.sh_gate_inp);
  return d;
}

size_t moe_active_bytes(const MoeLayerWeights& w, const ModelConfig& c) {
  size_t all = 0;
  for (size_t e = 0; e < w.gate.size(); ++e) all += bytes(w.gate[e]) + bytes(w.up[e]) + bytes(w.down[e]);
  const size_t per_expert = w.gate.empty() ? 0 : all / w.gate.size();
  return bytes(w.router) + size_t(c.moe.n_used) * per_expert + bytes(w.sh_gate) + bytes(w.sh_up) + bytes(w.sh_down) +
         bytes(w.sh_gate_inp);
}

}  // namespace polykv
