// Internals shared by the trellis-coded turbo decoders (turbo_trellis*.cpp) and the row kernels
// built on them: the shape of a head whose head_dim was validated when its rows were made (so the hot
// paths skip the checks), and the parts of one group record (layout in turbo_trellis.h).
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/fp16.h"
#include "quant/turbo_internal.h"

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

// The group loop of every trellis encoder (quantize_head and its AVX2 form, turbo_trellis_encode_avx2.cpp), with the
// reference's operations: per group of n, r² in the Strided order (an all-zero group keeps its zeroed record: r' = 0),
// u = rotate_group(x_g) * float(1 / r), ||c||² = encode(u, rec) (t bits and indices into the zeroed record), then
// r' = r / ||c|| as fp16. Unchecked: the caller validated bits and head_dim (levels(), group_size()).
template <class Rotate, class Encode>
void encode_groups(int bits, const float* x, uint8_t* dst, int head_dim, Rotate&& rotate_group, Encode&& encode) {
  const Shape s = shape(bits, head_dim);
  const int n = s.group;
  alignas(32) float u[128];
  for (int g = 0; g < s.n_groups; ++g) {
    uint8_t* rec = dst + size_t(g) * s.group_bytes;
    std::memset(rec, 0, s.group_bytes);
    const double r2 = turbo::detail::group_norm2(x + g * n, n);
    if (r2 == 0) continue;  // all-zero group: r' = 0
    const double r = std::sqrt(r2);
    std::memcpy(u, x + g * n, sizeof(float) * size_t(n));
    rotate_group(u, n);
    const float inv_r = float(1.0 / r);
    for (int i = 0; i < n; ++i) u[i] *= inv_r;
    const double c2 = encode(static_cast<const float*>(u), rec);
    const uint16_t h = f32_to_fp16(float(r / std::sqrt(c2)));
    std::memcpy(rec, &h, 2);
  }
}

// Unchecked levels(bits, group): bits in {2, 3, 4}, group in {32, 64, 128}.
const float* level_table(int bits, int group);

}  // namespace polykv::turbo::trellis::detail
