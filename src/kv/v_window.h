// Mixed precision of V by position: the attention-sink positions (the first n_sink) and the `recent`
// most recent positions keep a second copy of their V rows in a more precise type (q8_0), which
// attention reads instead of the compressed row. Attention weight concentrates on exactly these
// positions, so their V error dominates the output's; the copy costs (n_sink + recent) rows per layer
// and KV head whatever the context length.
//
// The copy is held in V's basis (rotated for turbo types), so attention accumulates it into the same
// accumulator as the compressed rows. A slot remembers which position it holds: a position whose slot
// was reused (or rolled back) is simply read from the compressed row.
//
// Names: a V cache type followed by 'w' ("turbo3w", "turbo2w", ...) is that type with
// kDefaultSinks sinks and kDefaultRecent recent positions in q8_0.
#pragma once
#include <string>

#include "kv/kv_type.h"

namespace polykv {

struct VPrecisionWindow {
  int n_sink = 0;   // positions 0 .. n_sink-1
  int recent = 0;   // the last `recent` positions stored
  KvType type = KvType::Q8_0;

  bool enabled() const { return n_sink + recent > 0; }
  int n_slots() const { return n_sink + recent; }
};

// 4 sinks + 26 recent: at a context of 2048, turbo3 + this window stores 3.125 + 30 * 8.5 / 2048
// = 3.2495 bits per value, norms and all side data counted (the 3.25-bit budget).
inline constexpr int kDefaultSinks = 4;
inline constexpr int kDefaultRecent = 26;

struct VCacheSpec {
  KvType type = KvType::F16;
  VPrecisionWindow window;
};

// "turbo3" -> {turbo3, no window}; "turbo3w" -> {turbo3, {4, 26, q8_0}}. Throws Error listing the
// valid names if unknown.
VCacheSpec parse_v_cache_spec(const std::string& name);

}  // namespace polykv
