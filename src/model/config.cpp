#include "model/config.h"

#include <cmath>
#include <string>

#include "core/error.h"
#include "core/printable.h"

namespace polykv {

namespace {

const ArchFamily* find_family(const std::string& arch) {
  for (const ArchFamily* fam : {&llama_family(), &gemma_family(), &moe_family(), &qwen35_family()})
    for (const char* const* n = fam->names; *n; ++n)
      if (arch == *n) return fam;
  return nullptr;
}

// The `ARCH.*` hyperparameters polykv reads (here or in an arch_*.cpp file), with the ranges a working
// model's values lie in. Every one present in the file is checked, whether or not this architecture
// reads it, so a corrupt value (NaN, 0, negative, absurd) is an error naming its key, never garbage.
struct IntRange {
  const char* key;  // after "ARCH."
  int64_t lo, hi;   // lo <= value <= hi
};
constexpr IntRange kIntKeys[] = {
    {"block_count", 1, 1024},
    {"embedding_length", 1, 1 << 20},
    {"feed_forward_length", 1, 1 << 22},
    {"attention.head_count", 1, 1 << 12},
    {"attention.head_count_kv", 1, 1 << 12},
    {"attention.key_length", 2, 1 << 12},
    {"attention.value_length", 1, 1 << 12},
    {"rope.dimension_count", 2, 1 << 12},
    {"context_length", 1, 1 << 26},
    {"attention.sliding_window", 1, 1 << 26},
    {"full_attention_interval", 1, 1024},
    {"nextn_predict_layers", 0, 16},
    {"ssm.conv_kernel", 1, 64},
    {"ssm.state_size", 1, 1 << 12},
    {"ssm.group_count", 1, 1 << 12},
    {"ssm.time_step_rank", 1, 1 << 12},
    {"ssm.inner_size", 1, 1 << 20},
    {"rope.scaling.original_context_length", 1, 1 << 30},
    {"expert_count", 1, 1 << 12},
    {"expert_used_count", 1, 1 << 12},
    {"expert_feed_forward_length", 1, 1 << 22},
    {"expert_shared_feed_forward_length", 1, 1 << 22},
    {"nextn_predict_layers", 0, 16},
};

struct FloatRange {
  const char* key;   // after "ARCH."
  double lo, hi;     // finite, lo < value <= hi (lo <= value when lo_closed)
  bool lo_closed;
};
constexpr FloatRange kFloatKeys[] = {
    {"attention.layer_norm_rms_epsilon", 0.0, 1.0, false},
    {"rope.freq_base", 1.0, 1e12, false},
    {"rope.freq_base_swa", 1.0, 1e12, false},
    {"rope.scaling.factor", 0.0, 1024.0, false},
    {"attn_logit_softcapping", 0.0, 1e6, true},  // 0: none
    {"final_logit_softcapping", 0.0, 1e6, true},
    {"rope.scaling.yarn_beta_fast", 0.0, 1e6, false},
    {"rope.scaling.yarn_beta_slow", 0.0, 1e6, false},
};

void check_hyperparameter_ranges(const GgufFile& f, const std::string& a) {
  for (const IntRange& r : kIntKeys) {
    const std::string key = a + r.key;
    if (!f.has(key)) continue;
    const int64_t v = f.get_i64(key);  // throws if not an integer
    check(v >= r.lo && v <= r.hi, "metadata '", key, "' = ", v, " is out of range [", r.lo, ", ", r.hi, "]");
  }
  for (const FloatRange& r : kFloatKeys) {
    const std::string key = a + r.key;
    if (!f.has(key)) continue;
    const float v = f.get_f32(key);  // throws if not a float; f64 values as the float polykv uses
    const bool ok = std::isfinite(v) && (r.lo_closed ? v >= r.lo : v > r.lo) && v <= r.hi;
    check(ok, "metadata '", key, "' = ", v, " is out of range: expected a finite value in ", r.lo_closed ? "[" : "(",
          r.lo, ", ", r.hi, "]");
  }
}

// The first layer that is not sliding (global attention), else layer 0: its RoPE base is the model's
// "global" one, which --rope-freq-base and YaRN act on (gemma3's sliding layers keep their local base).
const LayerConfig& global_rope_layer(const ModelConfig& c) {
  for (const LayerConfig& l : c.layers)
    if (!l.sliding) return l;
  return c.layers.front();
}

void apply_rope_override(ModelConfig& c, const RopeOverride& o) {
  if (o.empty()) return;
  check(o.scaling.empty() || o.scaling == "none" || o.scaling == "linear" || o.scaling == "yarn",
        "--rope-scaling '", printable(o.scaling), "': expected none, linear or yarn");
  const float global_base = global_rope_layer(c).rope_base;
  auto for_global_layers = [&](auto&& f) {  // the layers that share the global base (all of them in most models)
    for (LayerConfig& l : c.layers)
      if (!l.sliding || l.rope_base == global_base) f(l);
  };
  std::string kind = o.scaling;
  if (kind.empty()) {
    bool linear = false;
    for (const LayerConfig& l : c.layers) linear |= l.rope_scale != 1.0f;
    kind = c.yarn.factor > 1 ? "yarn" : linear ? "linear" : "none";
  }
  check(o.scale <= 0 || kind != "none", "--rope-scale needs --rope-scaling linear or yarn (the file has no scaling)");
  check(o.yarn_orig_ctx <= 0 || kind == "yarn", "--yarn-orig-ctx needs --rope-scaling yarn");
  if (kind != "yarn") c.yarn.factor = 0, c.rope_freq_divisors.clear();
  if (kind != "linear") for_global_layers([](LayerConfig& l) { l.rope_scale = 1.0f; });
  if (kind == "linear" && o.scale > 0) {
    // A file with linear scaling states its scaled context (as transformers' max_position_embeddings does for
    // such models), so the original is that over the file's factor: a new factor replaces the file's, it does
    // not multiply it.
    const float file_scale = global_rope_layer(c).rope_scale > 0 ? global_rope_layer(c).rope_scale : 1.0f;
    for_global_layers([&](LayerConfig& l) { l.rope_scale = o.scale; });
    c.n_ctx_train = int(std::lround(double(c.n_ctx_train) / double(file_scale) * o.scale));
  }
  if (kind == "yarn") {
    const bool from_file = c.yarn.factor > 1;
    if (!from_file) c.yarn.orig_ctx = float(c.n_ctx_train);
    if (o.yarn_orig_ctx > 0) c.yarn.orig_ctx = float(o.yarn_orig_ctx);
    if (o.scale > 0) c.yarn.factor = o.scale;
    check(c.yarn.factor > 1, "--rope-scaling yarn needs --rope-scale above 1 (the file has no YaRN factor)");
    if (o.scale > 0 || o.yarn_orig_ctx > 0 || !from_file)
      c.n_ctx_train = int(std::lround(double(c.yarn.orig_ctx) * c.yarn.factor));
  }
  if (o.freq_base > 0) for_global_layers([&](LayerConfig& l) { l.rope_base = o.freq_base; });
}

}  // namespace

ModelConfig config_from_gguf(const GgufFile& f, const RopeOverride& rope) {
  ModelConfig c;
  c.arch = f.get_str("general.architecture");
  const ArchFamily* fam = find_family(c.arch);
  check(fam != nullptr, "unsupported architecture '", printable(c.arch),
        "' (polykv runs llama, qwen2, qwen3, gemma2, gemma3, qwen3moe, gpt-oss, qwen35, qwen35moe)");
  const std::string a = c.arch + ".";
  check_hyperparameter_ranges(f, a);
  // Below: relations between the (individually in-range) values, and the defaults of absent keys.
  // block_count counts the MTP (nextn) blocks too: they follow the main layers (model/mtp_head.h).
  const int n_block = int(f.get_u32(a + "block_count"));
  c.n_nextn = int(f.get_u32(a + "nextn_predict_layers", 0));
  check(c.n_nextn < n_block, "invalid ", a, "nextn_predict_layers = ", c.n_nextn, ": not less than ", a,
        "block_count = ", n_block);
  c.n_layer = n_block - c.n_nextn;
  c.n_embd = int(f.get_u32(a + "embedding_length"));
  // MoE files without a dense FFN (qwen35moe) have only the experts' size.
  c.n_ff = int(f.has(a + "feed_forward_length") || !f.has(a + "expert_feed_forward_length")
                   ? f.get_u32(a + "feed_forward_length")
                   : f.get_u32(a + "expert_feed_forward_length"));
  c.n_head = int(f.get_u32(a + "attention.head_count"));
  c.n_head_kv = int(f.get_u32(a + "attention.head_count_kv", uint32_t(c.n_head)));
  check(c.n_head_kv <= c.n_head && c.n_head % c.n_head_kv == 0, "invalid attention heads: ", a,
        "attention.head_count = ", c.n_head, " is not a multiple of ", a, "attention.head_count_kv = ", c.n_head_kv);
  c.head_dim = int(f.get_u32(a + "attention.key_length", uint32_t(c.n_embd / c.n_head)));
  c.head_dim_v = int(f.get_u32(a + "attention.value_length", uint32_t(c.head_dim)));
  check(c.head_dim > 0 && c.head_dim % 2 == 0 && c.head_dim_v > 0, "invalid head size ", c.head_dim, " (", a,
        "attention.key_length, default ", a, "embedding_length / ", a, "attention.head_count)");
  c.n_rot = int(f.get_u32(a + "rope.dimension_count", uint32_t(c.head_dim)));
  check(c.n_rot <= c.head_dim && c.n_rot % 2 == 0, "invalid ", a, "rope.dimension_count = ", c.n_rot,
        ": must be even and at most the head size ", c.head_dim);
  c.n_ctx_train = int(f.get_u32(a + "context_length", 4096));
  c.rms_eps = f.get_f32(a + "attention.layer_norm_rms_epsilon", 1e-5f);
  c.attn_scale = 1.0f / std::sqrt(float(c.head_dim));
  const float rope_base = f.get_f32(a + "rope.freq_base", 10000.0f);
  float rope_scale = 1.0f;
  const std::string scaling = f.get_str(a + "rope.scaling.type", "none");
  if (scaling == "linear") rope_scale = f.get_f32(a + "rope.scaling.factor", 1.0f);
  c.layers.assign(size_t(c.n_layer), LayerConfig{false, rope_base, rope_scale});
  if (scaling == "yarn") {
    c.yarn.factor = f.get_f32(a + "rope.scaling.factor", 1.0f);
    c.yarn.orig_ctx = float(f.get_u32(a + "rope.scaling.original_context_length", uint32_t(c.n_ctx_train)));
    c.yarn.beta_fast = f.get_f32(a + "rope.scaling.yarn_beta_fast", 32.0f);
    c.yarn.beta_slow = f.get_f32(a + "rope.scaling.yarn_beta_slow", 1.0f);
  }

  const GgufTensor& embd = f.tensor("token_embd.weight");
  check(embd.ne.size() == 2 && embd.ne[0] == c.n_embd, "token_embd.weight has shape not matching n_embd ", c.n_embd);
  check(embd.ne[1] <= (1 << 24), "token_embd.weight has ", embd.ne[1], " rows: more than 2^24 tokens");
  c.n_vocab = int(embd.ne[1]);
  fam->fill(f, c);
  apply_rope_override(c, rope);
  if (c.yarn.factor > 1) {
    c.rope_freq_divisors = c.yarn.freq_divisors(global_rope_layer(c).rope_base, c.n_rot);
    const float ms = c.yarn.mscale();
    c.attn_scale *= ms * ms;  // cos and sin carry mscale: q·k carries its square
  }
  assign_layer_slots(c);
  return c;
}

int ModelConfig::n_kv_layers() const {
  int n = 0;
  for (const LayerConfig& l : layers) n += l.kind == LayerKind::Attention;
  return n;
}

int ModelConfig::n_state_layers() const { return int(layers.size()) - n_kv_layers(); }

void assign_layer_slots(ModelConfig& c) {
  int kv = 0, state = 0;
  for (LayerConfig& l : c.layers) {
    const bool attn = l.kind == LayerKind::Attention;
    l.kv_layer = attn ? kv++ : -1;
    l.state_layer = attn ? -1 : state++;
  }
}

}  // namespace polykv
