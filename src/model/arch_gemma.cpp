// The gemma family: gemma2 (alternating sliding/global layers, attention and final logit
// soft-capping) and gemma3 (5 sliding : 1 global, separate local rope base, q/k RMSNorm). Both:
// embeddings × sqrt(n_embd), sandwich norms, GELU(tanh) gated MLP, NEOX rope. Norm weights in GGUF
// already include gemma's +1.
#include "core/error.h"
#include "model/config.h"

namespace polykv {
namespace {

const char* const kNames[] = {"gemma2", "gemma3", nullptr};

void fill(const GgufFile& f, ModelConfig& c) {
  const std::string a = c.arch + ".";
  c.rope_style = RopeStyle::Neox;
  c.activation = Activation::GeluTanh;
  c.embed_scale = true;
  c.sandwich_norm = true;
  c.sliding_window = int(f.get_u32(a + "attention.sliding_window", 4096));
  check(c.sliding_window > 0, "invalid sliding_window");
  if (c.arch == "gemma2") {
    c.attn_softcap = f.get_f32(a + "attn_logit_softcapping", 50.0f);
    c.final_softcap = f.get_f32(a + "final_logit_softcapping", 30.0f);
    for (int il = 0; il < c.n_layer; ++il) c.layers[il].sliding = il % 2 == 0;
  } else {
    c.qk_norm = true;
    const float local_base = f.get_f32(a + "rope.freq_base_swa", 10000.0f);
    for (int il = 0; il < c.n_layer; ++il) {
      LayerConfig& l = c.layers[il];
      l.sliding = il % 6 < 5;  // no pattern key in the file: gemma3's fixed 5 local : 1 global
      if (l.sliding) {
        l.rope_base = local_base;
        l.rope_scale = 1.0f;  // linear rope scaling applies to global layers only
      }
    }
  }
}

const ArchFamily kFamily{kNames, fill};

}  // namespace

const ArchFamily& gemma_family() { return kFamily; }

}  // namespace polykv
