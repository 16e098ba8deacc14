#include "model/weights.h"

#include <sys/mman.h>
#include <unistd.h>

#include "core/error.h"
#include "quant/quant.h"

namespace polykv {
namespace {

std::string shape_str(const std::vector<int64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

// Memory trade-off of the packed copies (matmul.h): while a matrix's original pages stay resident the
// weights are held twice. Where matmul never reads the original again, drop its whole pages from the
// file map (they are re-read from the file if anything touches them: matmul_ref, the embedding
// lookup's rows of token_embd), so resident
// memory stays about one copy of the weights.
void release_original(const GgufFile& f, const WeightMatrix& w) {
  if (!f.is_file_mapped() || matmul_reads_original(w)) return;
  const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  const uintptr_t b = reinterpret_cast<uintptr_t>(w.data);
  const uintptr_t e = b + w.row_stride * size_t(w.n_out);
  const uintptr_t b_up = (b + page - 1) & ~(page - 1), e_down = e & ~(page - 1);
  if (e_down > b_up) madvise(reinterpret_cast<void*>(b_up), e_down - b_up, MADV_DONTNEED);
}

WeightMatrix matrix(const GgufTensor& t, int64_t n_in, int64_t n_out, bool pack) {
  check(t.ne.size() == 2 && t.ne[0] == n_in && t.ne[1] == n_out, "tensor '", t.name, "' has shape ",
        shape_str(t.ne), ", expected [", n_in, ", ", n_out, "]");
  check(dtype_info(t.type).weight_type, "tensor '", t.name, "' has type ", dtype_name(t.type),
        ", which polykv cannot use as a weight");
  WeightMatrix w;
  w.type = t.type;
  w.data = t.data;
  w.n_in = n_in;
  w.n_out = n_out;
  w.row_stride = row_bytes(t.type, n_in);
  if (pack) pack_for_matmul(w);  // the CPU backend's interleaved copy, where it has one (matmul.h)
  return w;
}

// Binds and, for the CPU backend, packs and (right away, so that peak memory stays about one copy)
// releases the original.
WeightMatrix matrix(const GgufFile& f, const std::string& name, int64_t n_in, int64_t n_out, bool pack) {
  WeightMatrix w = matrix(f.tensor(name), n_in, n_out, pack);
  if (pack) release_original(f, w);
  return w;
}

std::vector<float> vec(const GgufFile& f, const std::string& name, int64_t n) {
  const GgufTensor& t = f.tensor(name);
  check(t.n_elements == n, "tensor '", t.name, "' has ", t.n_elements, " values, expected ", n);
  check(dtype_info(t.type).weight_type, "tensor '", t.name, "' has unsupported type ", dtype_name(t.type));
  std::vector<float> out(static_cast<size_t>(n));
  dequantize_row_ref(t.type, t.data, out.data(), n);
  return out;
}

}  // namespace

void release_unread_original(const GgufFile& f, const WeightMatrix& w) { release_original(f, w); }

WeightMatrix bind_matrix(const GgufFile& f, const std::string& name, int64_t n_in, int64_t n_out, bool pack_for_cpu) {
  return matrix(f, name, n_in, n_out, pack_for_cpu);
}

std::vector<float> bind_vector(const GgufFile& f, const std::string& name, int64_t n) { return vec(f, name, n); }

LayerWeights bind_layer(const GgufFile& f, const ModelConfig& c, int il, bool pack_for_cpu) {
  const bool pk = pack_for_cpu;
  const std::string p = "blk." + std::to_string(il) + ".";
  // Blocks past n_layer are nextn (MTP) blocks: full attention whatever the main layers are.
  const bool gdn = il < c.n_layer && c.layers[size_t(il)].kind == LayerKind::GatedDeltaNet;
  LayerWeights l;
  l.attn_norm = vec(f, p + "attn_norm.weight", c.n_embd);
  if (gdn) {
    l.gdn = bind_gdn_layer(f, c, p, pk, GdnBinders{matrix, vec});
  } else {
    l.wq = matrix(f, p + "attn_q.weight", c.n_embd, int64_t(c.q_dim()) * (c.attn_output_gate ? 2 : 1), pk);
    l.wk = matrix(f, p + "attn_k.weight", c.n_embd, c.kv_dim(), pk);
    l.wv = matrix(f, p + "attn_v.weight", c.n_embd, c.v_dim(), pk);
    l.wo = matrix(f, p + "attn_output.weight", int64_t(c.n_head) * c.head_dim_v, c.n_embd, pk);
    if (c.qkv_bias) {
      l.bq = vec(f, p + "attn_q.bias", c.q_dim());
      l.bk = vec(f, p + "attn_k.bias", c.kv_dim());
      l.bv = vec(f, p + "attn_v.bias", c.v_dim());
    }
    if (c.qk_norm) {
      l.q_norm = vec(f, p + "attn_q_norm.weight", c.head_dim);
      l.k_norm = vec(f, p + "attn_k_norm.weight", c.head_dim);
    }
  }
  if (c.o_bias) l.bo = vec(f, p + "attn_output.bias", c.n_embd);
  if (c.attn_sinks) l.attn_sinks = vec(f, p + "attn_sinks.weight", c.n_head);
  l.ffn_norm = vec(f, p + c.ffn_norm_tensor + ".weight", c.n_embd);
  if (c.sandwich_norm) {
    l.post_attn_norm = vec(f, p + "post_attention_norm.weight", c.n_embd);
    l.post_ffn_norm = vec(f, p + "post_ffw_norm.weight", c.n_embd);
  }
  if (c.moe.enabled()) {
    l.moe = bind_moe_weights(f, c, p, pk);
  } else {
    l.w_gate = matrix(f, p + "ffn_gate.weight", c.n_embd, c.n_ff, pk);
    l.w_up = matrix(f, p + "ffn_up.weight", c.n_embd, c.n_ff, pk);
    l.w_down = matrix(f, p + "ffn_down.weight", c.n_ff, c.n_embd, pk);
  }
  return l;
}

ModelWeights bind_weights(const GgufFile& f, const ModelConfig& c, bool pack_for_cpu) {
  const bool pk = pack_for_cpu;
  ModelWeights w;
  w.token_embd = matrix(f, "token_embd.weight", c.n_embd, c.n_vocab, pk);
  w.output_norm = vec(f, "output_norm.weight", c.n_embd);
  w.output = f.find_tensor("output.weight") ? matrix(f, "output.weight", c.n_embd, c.n_vocab, pk) : w.token_embd;
  if (f.find_tensor("rope_freqs.weight")) w.rope_inv_freq_factors = vec(f, "rope_freqs.weight", c.n_rot / 2);
  for (int il = 0; il < c.n_layer; ++il) w.layers.push_back(bind_layer(f, c, il, pk));
  return w;
}

}  // namespace polykv
