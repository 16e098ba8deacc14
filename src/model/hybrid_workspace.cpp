#include "model/hybrid_workspace.h"

#include <cstdint>

namespace polykv {

HybridWorkspace::~HybridWorkspace() {
  if (arena_) backend_.release(arena_);
}

void HybridWorkspace::reserve(const ModelConfig& c, int rows) {
  if (!c.attn_output_gate && c.n_state_layers() == 0) return;
  if (arena_ && rows <= rows_) return;
  const size_t r = size_t(rows);
  const GdnConfig& g = c.gdn;
  const size_t sizes[] = {
      r * 2 * size_t(c.q_dim()),        // qg
      r * size_t(c.q_dim()),            // attn_gate
      r * size_t(g.conv_channels()),    // qkv
      r * size_t(g.conv_channels()),    // conv
      r * size_t(g.v_dim()),            // z
      r * size_t(g.n_v_heads),          // alpha
      r * size_t(g.n_v_heads),          // beta
      r * size_t(g.v_dim()),            // o
  };
  auto aligned = [](size_t n) { return (n * sizeof(float) + 63) & ~size_t(63); };
  size_t total = 0;
  for (size_t s : sizes) total += aligned(s);
  void* arena = backend_.allocate(total);
  if (arena_) backend_.release(arena_);
  arena_ = arena;
  rows_ = rows;
  auto* p = static_cast<uint8_t*>(arena_);
  size_t i = 0;
  for (float** f : {&qg, &attn_gate, &qkv, &conv, &z, &alpha, &beta, &o}) {
    *f = reinterpret_cast<float*>(p);
    p += aligned(sizes[i++]);
  }
}

}  // namespace polykv
