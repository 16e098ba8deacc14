// Small enums that name how a layer computes, shared by the model's config (model/config.h), the
// kernels (backend/cpu/ops.h) and the K equalizer (kv/k_equalizer.h). They live in core so that
// lower layers never include the model.
#pragma once

namespace polykv {

enum class RopeStyle {
  Norm,  // rotate adjacent pairs (2i, 2i+1): llama (its converter permutes Q/K rows to this)
  Neox,  // rotate (i, i + n_rot/2): qwen, gemma
};

enum class Activation { SiLU, GeluTanh };

}  // namespace polykv
