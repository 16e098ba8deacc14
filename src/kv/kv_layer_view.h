// Read-only access to one layer of one sequence's KV rows, wherever they live: block pointers per
// position range (a private cache's blocks or a block table into the shared pool). Attention reads
// K and V through it in their stored types and never owns them.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kv/kv_type.h"

namespace polykv {

struct KvLayerView {
  KvType k_type = KvType::F16;
  KvType v_type = KvType::F16;
  int block_tokens = 0;
  int n_head_kv = 0;
  int head_dim = 0;
  int head_dim_v = 0;
  const uint8_t* const* k_blocks = nullptr;  // [n_blocks]; nullptr where released
  const uint8_t* const* v_blocks = nullptr;  // [n_blocks]
  size_t k_head_bytes = 0;   // bytes of one (token, head) K row
  size_t v_head_bytes = 0;

  // K row of (position, KV head g); rows of consecutive positions in one block are adjacent.
  const uint8_t* k_row(int pos, int g) const {
    return k_blocks[pos / block_tokens] + (size_t(g) * size_t(block_tokens) + size_t(pos % block_tokens)) * k_head_bytes;
  }
  const uint8_t* v_row(int pos, int g) const {
    return v_blocks[pos / block_tokens] + (size_t(g) * size_t(block_tokens) + size_t(pos % block_tokens)) * v_head_bytes;
  }

  // Precise V copies (kv/v_window.h): [n_slots][n_head_kv] rows of v_hi_head_bytes in v_hi_type, in V's
  // basis; slot_pos[s] is the position slot s holds (-1: none). Empty when the window is off.
  KvType v_hi_type = KvType::Q8_0;
  int n_sink = 0, recent = 0;
  const uint8_t* v_hi = nullptr;
  const int32_t* slot_pos = nullptr;
  size_t v_hi_head_bytes = 0;

  // The precise V row of (pos, g), or nullptr if the window does not hold pos.
  const uint8_t* v_hi_row(int pos, int g) const {
    if (!v_hi) return nullptr;
    const int slot = pos < n_sink ? pos : (recent > 0 ? n_sink + (pos - n_sink) % recent : -1);
    if (slot < 0 || slot_pos[slot] != pos) return nullptr;
    return v_hi + (size_t(slot) * size_t(n_head_kv) + size_t(g)) * v_hi_head_bytes;
  }
};

}  // namespace polykv
