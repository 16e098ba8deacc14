#include "model/config.h"

#include <cmath>
#include <string>

#include "core/error.h"

namespace polykv {

namespace {

const ArchFamily* find_family(const std::string& arch) {
  for (const ArchFamily* fam : {&llama_family(), &gemma_family()})
    for (const char* const* n = fam->names; *n; ++n)
      if (arch == *n) return fam;
  return nullptr;
}

}  // namespace

ModelConfig config_from_gguf(const GgufFile& f) {
  ModelConfig c;
  c.arch = f.get_str("general.architecture");
  const ArchFamily* fam = find_family(c.arch);
  check(fam != nullptr, "unsupported architecture '", c.arch, "' (polykv runs llama, qwen2, qwen3, gemma2, gemma3)");
  const std::string a = c.arch + ".";
  c.n_layer = int(f.get_u32(a + "block_count"));
  c.n_embd = int(f.get_u32(a + "embedding_length"));
  c.n_ff = int(f.get_u32(a + "feed_forward_length"));
  c.n_head = int(f.get_u32(a + "attention.head_count"));
  c.n_head_kv = int(f.get_u32(a + "attention.head_count_kv", uint32_t(c.n_head)));
  check(c.n_layer > 0 && c.n_layer <= 1024, "invalid block_count ", c.n_layer);
  check(c.n_embd > 0 && c.n_head > 0 && c.n_head_kv > 0 && c.n_head % c.n_head_kv == 0,
        "invalid attention heads: ", c.n_head, " query heads, ", c.n_head_kv, " KV heads");
  c.head_dim = int(f.get_u32(a + "attention.key_length", uint32_t(c.n_embd / c.n_head)));
  c.head_dim_v = int(f.get_u32(a + "attention.value_length", uint32_t(c.head_dim)));
  check(c.head_dim > 0 && c.head_dim % 2 == 0 && c.head_dim_v > 0, "invalid head size ", c.head_dim);
  c.n_rot = int(f.get_u32(a + "rope.dimension_count", uint32_t(c.head_dim)));
  check(c.n_rot > 0 && c.n_rot <= c.head_dim && c.n_rot % 2 == 0, "invalid rope.dimension_count ", c.n_rot);
  c.n_ctx_train = int(f.get_u32(a + "context_length", 4096));
  c.rms_eps = f.get_f32(a + "attention.layer_norm_rms_epsilon", 1e-5f);
  c.attn_scale = 1.0f / std::sqrt(float(c.head_dim));
  const float rope_base = f.get_f32(a + "rope.freq_base", 10000.0f);
  float rope_scale = 1.0f;
  const std::string scaling = f.get_str(a + "rope.scaling.type", "none");
  if (scaling == "linear") rope_scale = f.get_f32(a + "rope.scaling.factor", 1.0f);
  check(rope_scale > 0, "invalid rope.scaling.factor");
  c.layers.assign(size_t(c.n_layer), LayerConfig{false, rope_base, rope_scale});

  const GgufTensor& embd = f.tensor("token_embd.weight");
  check(embd.ne.size() == 2 && embd.ne[0] == c.n_embd, "token_embd.weight has shape not matching n_embd ", c.n_embd);
  c.n_vocab = int(embd.ne[1]);
  fam->fill(f, c);
  return c;
}

}  // namespace polykv
