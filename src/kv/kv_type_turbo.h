// The turbo2/3/4 KV types' operations, built on the TurboQuant primitives (quant/turbo.h).
#pragma once
#include <cstddef>

#include "kv/kv_type.h"

namespace polykv {

// Ops of turbo<bits> (bits 2, 3, 4), or nullptr for other bits.
const KvTypeOps* turbo_kv_ops(int bits);
// Bytes per (token, head) of turbo<bits> rows; head_dim already checked.
size_t turbo_kv_head_bytes(int bits, int head_dim);

// Ops (nullptr for other bits) and row bytes of turbo<bits>t (trellis-coded, quant/turbo_trellis.h).
const KvTypeOps* turbo_trellis_kv_ops(int bits);
size_t turbo_trellis_kv_head_bytes(int bits, int head_dim);

}  // namespace polykv
