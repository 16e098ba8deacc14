#include "model/step_workspace.h"

#include <algorithm>

namespace polykv {

StepWorkspace::~StepWorkspace() {
  if (arena_) backend_.release(arena_);
}

void StepWorkspace::reserve(const ModelConfig& c, int rows, int out_rows) {
  if (arena_ && rows <= rows_ && out_rows <= out_rows_) return;
  rows = std::max(rows, rows_);
  out_rows = std::max(out_rows, out_rows_);
  const size_t r = size_t(rows);
  // Buffer sizes in bytes, in the order of the members; each starts on a 64-byte boundary.
  const size_t sizes[] = {
      r * size_t(c.n_embd) * 4,                            // x
      r * size_t(c.n_embd) * 4,                            // h
      r * size_t(c.q_dim()) * 4,                           // q
      r * size_t(c.kv_dim()) * 4,                          // k
      r * size_t(c.v_dim()) * 4,                           // v
      r * size_t(c.n_head) * size_t(c.head_dim_v) * 4,     // att
      r * size_t(c.n_ff) * 4,                              // gate
      r * size_t(c.n_ff) * 4,                              // up
      4 * r * sizeof(int32_t),                             // ids
      r * sizeof(int32_t),                                 // argmax
      r * size_t(c.n_embd) * 4,                            // hidden
      size_t(out_rows) * size_t(c.n_vocab) * 4,            // logits
  };
  auto aligned = [](size_t n) { return (n + 63) & ~size_t(63); };
  size_t total = 0;
  for (size_t s : sizes) total += aligned(s);
  void* arena = backend_.allocate(total);  // throws before anything is released
  if (arena_) backend_.release(arena_);
  arena_ = arena;
  rows_ = rows;
  out_rows_ = out_rows;
  auto* p = static_cast<uint8_t*>(arena_);
  size_t i = 0;
  auto next = [&] {
    uint8_t* at = p;
    p += aligned(sizes[i++]);
    return at;
  };
  for (float** f : {&x, &h, &q, &k, &v, &att, &gate, &up}) *f = reinterpret_cast<float*>(next());
  ids = reinterpret_cast<int32_t*>(next());
  argmax = reinterpret_cast<int32_t*>(next());
  hidden = reinterpret_cast<float*>(next());
  logits = reinterpret_cast<float*>(next());
}

}  // namespace polykv
