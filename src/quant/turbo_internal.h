// Internals shared by the turbo*.cpp files (not part of the API in turbo.h): the validated layout
// of one head, unchecked level-table access, bit-stream index access and the kernel table.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/fp16.h"

namespace polykv::turbo::detail {

// Shape of one coded head. Invariants: bits in {2,3,4}; group in {32, 64, 128};
// n_groups * group == head_dim; group_bytes == 2 + group * bits / 8.
struct Layout {
  int bits, group, n_groups;
  size_t group_bytes;
};
// Validates bits and head_dim (throws Error) and returns the layout.
Layout layout(int bits, int head_dim);

// Unchecked: the 2^bits levels for N(0, 1/group); bits in {2,3,4}, group in {32,64,128}.
const float* level_table(int bits, int group);

// The n-point sign vector of S (n in {32,64,128}), entries +1.0f / -1.0f.
const float* sign_table(int n);

// Index i of the LSB-first bit stream at p (bits in {2,3,4}).
inline int read_index(const uint8_t* p, int bits, int i) {
  const int bit = bits * i;
  const int lo = p[bit >> 3] >> (bit & 7);
  const int hi = ((bit & 7) + bits > 8) ? (p[(bit >> 3) + 1] << (8 - (bit & 7))) : 0;
  return (lo | hi) & ((1 << bits) - 1);
}

// Writes index i (< 2^bits) into the bit stream at p; the destination bits must be zero.
inline void write_index(uint8_t* p, int bits, int i, int idx) {
  const int bit = bits * i;
  p[bit >> 3] |= uint8_t(idx << (bit & 7));
  if ((bit & 7) + bits > 8) p[(bit >> 3) + 1] |= uint8_t(idx >> (8 - (bit & 7)));
}

// The order in which every turbo encoder (this CPU reference and the GPU's kv_store, which must give
// the same bytes) sums n = 32, 64 or 128 doubles v[0..n) of a group, r² and ||c||²: 32 partial sums,
// p_l adding in order v[l], v[l + 32], ... (Strided) or v[l m], v[l m + 1], ..., v[l m + m - 1] with
// m = n / 32 (Blocked), then the tree p_l = p_l + p_{l+h} for h = 16, 8, 4, 2, 1 (what a warp's
// butterfly of shuffles computes in every lane); the sum is p_0. A tree, not a chain of n dependent
// adds: on the GPU a chain is one lane's latency (before 2026-12-02: 2 x 128 dependent adds per group).
enum class LaneOrder { Strided, Blocked };
inline double lane_tree_sum(const double* v, int n, LaneOrder order) {
  const int m = n / 32;
  double p[32];
  for (int l = 0; l < 32; ++l) {
    const int first = order == LaneOrder::Strided ? l : l * m, step = order == LaneOrder::Strided ? 32 : 1;
    p[l] = v[first];
    for (int k = 1; k < m; ++k) p[l] = p[l] + v[first + k * step];
  }
  for (int h = 16; h >= 1; h /= 2)
    for (int l = 0; l < h; ++l) p[l] = p[l] + p[l + h];
  return p[0];
}

// r² of a group: sum of double(x_i)² in the Strided order.
inline double group_norm2(const float* x, int n) {
  double sq[128];
  for (int i = 0; i < n; ++i) sq[i] = double(x[i]) * double(x[i]);
  return lane_tree_sum(sq, n, LaneOrder::Strided);
}

inline float read_norm(const uint8_t* rec) {
  uint16_t h;
  std::memcpy(&h, rec, 2);
  return fp16_to_f32(h);
}

// Rotated-basis kernels over a whole head (same contracts as dot_rotated / axpy_rotated).
struct Kernels {
  float (*dot)(int bits, const uint8_t* src, const float* q_rot, int head_dim);
  void (*axpy)(int bits, float a, const uint8_t* src, float* acc_rot, int head_dim);
  void (*decode)(int bits, const uint8_t* src, float* y_rot, int head_dim);
};
const Kernels& kernels_scalar();
const Kernels* kernels_avx2();  // nullptr when the CPU lacks AVX2 + FMA + F16C
const Kernels& kernels();       // the active ISA's (core/isa.h), at each call

}  // namespace polykv::turbo::detail
