// qwen35, qwen35moe: the Qwen3.5 hybrid of Gated DeltaNet (linear attention) and gated full attention.
// Conventions the file relies on but does not state (../shared/fixtures/README.md, qwen35 section):
//  - block_count = n_layer + nextn_predict_layers: the last block(s) are the MTP head, not part of the
//    main forward pass;
//  - layer il is a Gated DeltaNet iff (il + 1) % full_attention_interval != 0, else gated attention;
//  - every RMSNorm weight but ssm_norm already contains the +1 (used as stored);
//  - the MLP's pre-norm is post_attention_norm; attn_q rows are per head [query | output gate];
//  - NEOX rope on the first rope.dimension_count dims of each head (M-RoPE sections: equal for text).
#include "core/error.h"
#include "model/config.h"

namespace polykv {
namespace {

const char* const kNames[] = {"qwen35", "qwen35moe", nullptr};

void fill(const GgufFile& f, ModelConfig& c) {
  const std::string a = c.arch + ".";
  c.rope_style = RopeStyle::Neox;
  c.activation = Activation::SiLU;
  c.qk_norm = true;
  c.attn_output_gate = true;
  c.ffn_norm_tensor = "post_attention_norm";
  // The main model's layers (assigned, not subtracted: the same whoever else reads nextn_predict_layers).
  const int n_nextn = int(f.get_u32(a + "nextn_predict_layers", 0));
  const int n_layer = int(f.get_u32(a + "block_count")) - n_nextn;
  check(n_layer > 0, "invalid ", a, "nextn_predict_layers = ", n_nextn, ": no main layers left");
  c.n_layer = n_layer;
  c.layers.resize(size_t(n_layer), c.layers.front());

  GdnConfig& g = c.gdn;
  g.n_k_heads = int(f.get_u32(a + "ssm.group_count"));
  g.n_v_heads = int(f.get_u32(a + "ssm.time_step_rank"));
  g.head_dim = int(f.get_u32(a + "ssm.state_size"));
  g.conv_kernel = int(f.get_u32(a + "ssm.conv_kernel"));
  const int inner = int(f.get_u32(a + "ssm.inner_size"));
  check(g.n_v_heads % g.n_k_heads == 0, "invalid ", a, "ssm.time_step_rank = ", g.n_v_heads,
        ": not a multiple of ssm.group_count = ", g.n_k_heads);
  check(inner == g.n_v_heads * g.head_dim, "invalid ", a, "ssm.inner_size = ", inner, ": expected time_step_rank * ",
        "state_size = ", g.n_v_heads * g.head_dim, " (key and value heads of equal size)");

  const int interval = int(f.get_u32(a + "full_attention_interval", 4));
  for (int il = 0; il < n_layer; ++il)
    c.layers[size_t(il)].kind = (il + 1) % interval != 0 ? LayerKind::GatedDeltaNet : LayerKind::Attention;
  if (c.arch == "qwen35moe") {  // routed experts as qwen3moe (softmax, top-k, renormalised) + a shared expert
    MoeConfig& m = c.moe;
    m.n_expert = int(f.get_u32(a + "expert_count"));
    m.n_used = int(f.get_u32(a + "expert_used_count"));
    m.n_ff_exp = int(f.get_u32(a + "expert_feed_forward_length", uint32_t(c.n_ff)));
    m.n_ff_shexp = int(f.get_u32(a + "expert_shared_feed_forward_length", 0));
    m.gating = MoeGating::SoftmaxTopKRenorm;
    check(m.n_used >= 1 && m.n_used <= m.n_expert, "invalid ", a, "expert_used_count = ", m.n_used, " with ",
          m.n_expert, " experts");
  }
  check(c.n_kv_layers() > 0, "qwen35: no full-attention layer (", a, "full_attention_interval = ", interval, ")");
}

const ArchFamily kFamily{kNames, fill};

}  // namespace

const ArchFamily& qwen35_family() { return kFamily; }

}  // namespace polykv
