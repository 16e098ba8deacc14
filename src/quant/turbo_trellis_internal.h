// Internals shared by the trellis-coded turbo decoders (turbo_trellis*.cpp) and the row kernels
// built on them: the shape of a head whose head_dim was validated when its rows were made (so the hot
// paths skip the checks), and the parts of one group record (layout in turbo_trellis.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/fp16.h"

namespace polykv::turbo::trellis::detail {

struct Shape {
  int group;           // 128 when head_dim % 128 == 0, else head_dim (32 or 64)
  int n_groups;        // head_dim / group
  size_t group_bytes;  // 2 + bits * group / 8
};

// Unchecked: bits in {2, 3, 4} and head_dim valid for turbo (turbo.h).
inline Shape shape(int bits, int head_dim) {
  const int n = head_dim % 128 == 0 ? 128 : head_dim;
  return Shape{n, head_dim / n, 2 + size_t(n) * size_t(bits) / 8};
}

struct Record {
  float norm;            // r'
  const uint8_t* tbits;  // t_0..t_{n-1}
  const uint8_t* jbits;  // the (bits - 1)-bit indices
};

// Group g of a head at src.
inline Record record(const uint8_t* src, const Shape& s, int g) {
  const uint8_t* rec = src + size_t(g) * s.group_bytes;
  uint16_t h;
  std::memcpy(&h, rec, 2);
  return Record{fp16_to_f32(h), rec + 2, rec + 2 + s.group / 8};
}

// Unchecked levels(bits, group): bits in {2, 3, 4}, group in {32, 64, 128}.
const float* level_table(int bits, int group);

}  // namespace polykv::turbo::trellis::detail
