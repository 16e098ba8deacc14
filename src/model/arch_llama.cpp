// The llama family: llama (incl. llama3 rope scaling through the rope_freqs tensor), qwen2 (q/k/v
// bias, NEOX rope), qwen3 (per-head q/k RMSNorm, NEOX rope). Pre-norm blocks, SwiGLU MLP.
#include "model/config.h"

namespace polykv {
namespace {

const char* const kNames[] = {"llama", "qwen2", "qwen3", nullptr};

void fill(const GgufFile& f, ModelConfig& c) {
  c.activation = Activation::SiLU;
  if (c.arch == "llama") {
    c.rope_style = RopeStyle::Norm;
  } else {
    c.rope_style = RopeStyle::Neox;
    c.qkv_bias = c.arch == "qwen2";
    c.qk_norm = c.arch == "qwen3";
  }
}

const ArchFamily kFamily{kNames, fill};

}  // namespace

const ArchFamily& llama_family() { return kFamily; }

}  // namespace polykv
