#include "model/shapes.h"

#include "core/error.h"

namespace polykv {
namespace {

ModelShape llama(std::string name, int n_layer, int n_embd, int n_ff, int n_head, int n_head_kv, int head_dim,
                 int n_vocab, int n_ctx, bool tied, Llama3RopeScaling rope) {
  ModelShape s;
  s.name = std::move(name);
  s.arch = "llama";
  s.n_layer = n_layer, s.n_embd = n_embd, s.n_ff = n_ff, s.n_head = n_head, s.n_head_kv = n_head_kv;
  s.head_dim = head_dim, s.n_vocab = n_vocab, s.n_ctx = n_ctx;
  s.rope_theta = 500000.0f;
  s.rms_eps = 1e-5f;
  s.tied_embeddings = tied;
  s.llama3_rope = rope;
  return s;
}

ModelShape qwen2(std::string name, int n_layer, int n_embd, int n_ff, int n_head, int n_head_kv, int head_dim,
                 int n_vocab, int n_ctx, bool tied) {
  ModelShape s;
  s.name = std::move(name);
  s.arch = "qwen2";
  s.n_layer = n_layer, s.n_embd = n_embd, s.n_ff = n_ff, s.n_head = n_head, s.n_head_kv = n_head_kv;
  s.head_dim = head_dim, s.n_vocab = n_vocab, s.n_ctx = n_ctx;
  s.rope_theta = 1000000.0f;
  s.rms_eps = 1e-6f;
  s.tied_embeddings = tied;
  s.qkv_bias = true;
  return s;
}

// Qwen 3 (dense): Qwen 2's shape without biases, with per-head q and k norms (arch_llama.cpp).
ModelShape qwen3(std::string name, int n_layer, int n_embd, int n_ff, int n_head, int n_head_kv, int head_dim,
                 int n_vocab, int n_ctx, bool tied) {
  ModelShape s = qwen2(std::move(name), n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim, n_vocab, n_ctx, tied);
  s.arch = "qwen3";
  s.qkv_bias = false;
  return s;
}

ModelShape gemma3(std::string name, int n_layer, int n_embd, int n_ff, int n_head, int n_head_kv, int head_dim,
                  int n_vocab, int n_ctx, int sliding_window, float linear_factor) {
  ModelShape s;
  s.name = std::move(name);
  s.arch = "gemma3";
  s.n_layer = n_layer, s.n_embd = n_embd, s.n_ff = n_ff, s.n_head = n_head, s.n_head_kv = n_head_kv;
  s.head_dim = head_dim, s.n_vocab = n_vocab, s.n_ctx = n_ctx;
  s.rope_theta = 1000000.0f;
  s.rope_theta_swa = 10000.0f;
  s.rms_eps = 1e-6f;
  s.tied_embeddings = true;
  s.sliding_window = sliding_window;
  s.swa_pattern = 6;
  s.rope_linear_factor = linear_factor;
  return s;
}

ModelShape qwen3moe(std::string name, int n_layer, int n_embd, int n_ff, int n_head, int n_head_kv, int head_dim,
                    int n_vocab, int n_ctx, int n_expert, int n_used, int n_ff_exp) {
  ModelShape s;
  s.name = std::move(name);
  s.arch = "qwen3moe";
  s.n_layer = n_layer, s.n_embd = n_embd, s.n_ff = n_ff, s.n_head = n_head, s.n_head_kv = n_head_kv;
  s.head_dim = head_dim, s.n_vocab = n_vocab, s.n_ctx = n_ctx;
  s.rope_theta = 1000000.0f;
  s.rms_eps = 1e-6f;
  s.n_expert = n_expert, s.n_expert_used = n_used, s.n_ff_exp = n_ff_exp;
  return s;
}

ModelShape gptoss(std::string name, int n_layer, int n_embd, int n_head, int n_head_kv, int head_dim, int n_vocab,
                  int n_expert, int n_used, int n_ff_exp, int sliding_window) {
  ModelShape s;
  s.name = std::move(name);
  s.arch = "gpt-oss";
  s.n_layer = n_layer, s.n_embd = n_embd, s.n_ff = n_ff_exp, s.n_head = n_head, s.n_head_kv = n_head_kv;
  s.head_dim = head_dim, s.n_vocab = n_vocab, s.n_ctx = 131072;
  s.rope_theta = 150000.0f;
  s.rms_eps = 1e-5f;
  s.n_expert = n_expert, s.n_expert_used = n_used, s.n_ff_exp = n_ff_exp;
  s.sliding_window = sliding_window;
  s.yarn_factor = 32.0f;
  s.yarn_orig_ctx = 4096;
  return s;
}

// Qwen3.5 hybrid: gdn_k / gdn_v heads of gdn_d, conv 4, every 4th layer gated attention with rope on
// n_rot of head_dim; theta 1e7, eps 1e-6. n_expert > 0 makes it qwen35moe (shared expert of n_ff_exp).
ModelShape qwen35(std::string name, int n_layer, int n_embd, int n_ff, int n_head, int n_head_kv, int head_dim,
                  int n_rot, int n_vocab, int gdn_k, int gdn_v, int gdn_d, int n_expert, int n_used, int n_ff_exp) {
  ModelShape s;
  s.name = std::move(name);
  s.arch = n_expert > 0 ? "qwen35moe" : "qwen35";
  s.n_layer = n_layer, s.n_embd = n_embd, s.n_ff = n_ff, s.n_head = n_head, s.n_head_kv = n_head_kv;
  s.head_dim = head_dim, s.n_vocab = n_vocab, s.n_ctx = 262144;
  s.rope_theta = 10000000.0f;
  s.rms_eps = 1e-6f;
  s.n_rot = n_rot;
  s.gdn_k_heads = gdn_k, s.gdn_v_heads = gdn_v, s.gdn_head_dim = gdn_d, s.gdn_conv_kernel = 4;
  s.full_attention_interval = 4;
  s.n_expert = n_expert, s.n_expert_used = n_used, s.n_ff_exp = n_ff_exp, s.n_ff_shexp = n_ff_exp;
  return s;
}

std::vector<ModelShape> make_shapes() {
  // Llama 3.2 1B uses rope factor 32, Llama 3.1 8B factor 8 (both low 1, high 4, original 8192).
  const Llama3RopeScaling l32{32.0, 1.0, 4.0, 8192.0};
  const Llama3RopeScaling l31{8.0, 1.0, 4.0, 8192.0};
  return {
      //     name             layers embd   ff     head kv  hdim vocab   ctx
      llama("llama-3.2-1b",   16, 2048,  8192, 32, 8, 64,  128256, 131072, /*tied=*/true, l32),
      llama("llama-3.1-8b",   32, 4096, 14336, 32, 8, 128, 128256, 131072, /*tied=*/false, l31),
      qwen2("qwen2.5-0.5b",   24,  896,  4864, 14, 2, 64,  151936, 32768, /*tied=*/true),
      qwen2("qwen2.5-7b",     28, 3584, 18944, 28, 4, 128, 152064, 32768, /*tied=*/false),
      qwen3("qwen3-8b",       36, 4096, 12288, 32, 8, 128, 151936, 40960, /*tied=*/false),
      gemma3("gemma-3-4b",    34, 2560, 10240,  8, 4, 256, 262144, 131072, /*window=*/1024, /*linear=*/8.0f),
      //        name              layers embd  ff   head kv hdim vocab   ctx    experts used ff_exp
      qwen3moe("qwen3-30b-a3b",   48, 2048, 6144, 32, 4, 128, 151936, 40960, 128, 8, 768),
      //      name            layers embd head kv hdim vocab   experts used ff_exp window
      gptoss("gpt-oss-20b",   24, 2880, 64, 8, 64,  201088, 32, 4, 2880, 128),
      // Qwen3.5-9B (text) and Qwen3.5-35B-A3B (256 experts, top-8 of 512, shared expert 512); untied.
      //      name               layers embd  ff     head kv hdim rot vocab   gdn k  v  d    experts used ff_exp
      qwen35("qwen3.5-9b",       32, 4096, 12288, 16, 4, 256, 64, 248320, 16, 32, 128,   0, 0,   0),
      qwen35("qwen3.5-35b-a3b",  40, 2048,   512, 16, 2, 256, 64, 248320, 16, 32, 128, 256, 8, 512),
      // Test shapes: every dimension a multiple of 256, so every block size fits.
      llama("tiny",            2,  256,   512,  4, 2, 64,     320,    512, /*tied=*/false,
            Llama3RopeScaling{8.0, 1.0, 4.0, 64.0}),
      qwen2("tiny-qwen2",      2,  256,   512,  4, 2, 64,     320,    512, /*tied=*/true),
      qwen3("tiny-qwen3",      2,  256,   512,  4, 2, 64,     320,    512, /*tied=*/true),
      gemma3("tiny-gemma3",    6,  256,   512,  2, 1, 256,    320,    512, /*window=*/16, /*linear=*/0.0f),
      qwen3moe("tiny-qwen3moe", 2,  256,   512,  4, 2, 64,     320,    512, 8, 2, 256),
      gptoss("tiny-gptoss",     4,  256,  4, 2, 64,  320, 8, 2, 256, 16),
      qwen35("tiny-qwen35",     4,  256,  512,  4, 2, 64, 16,  320,  2, 4, 64,   0, 0,   0),
      qwen35("tiny-qwen35moe",  4,  256,  256,  4, 2, 64, 16,  320,  2, 4, 64,   8, 2, 256),
  };
}

}  // namespace

const std::vector<ModelShape>& model_shapes() {
  static const std::vector<ModelShape> shapes = make_shapes();
  return shapes;
}

const ModelShape& find_model_shape(const std::string& name) {
  std::string valid;
  for (const auto& s : model_shapes()) {
    if (s.name == name) return s;
    valid += (valid.empty() ? "" : ", ") + s.name;
  }
  fail("unknown shape '", name, "'; valid shapes: ", valid);
}

}  // namespace polykv
