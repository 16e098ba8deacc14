// The q8_0 / q4_0 K-row dot of the ARM64 NEON KV kernels (kv_row_ops_neon.cpp) against q8_0 queries,
// written once over an integer-dot policy Ops (neon_int_dot.h) and instantiated twice:
// kv_row_ops_neon.cpp (plain, SMULL + SADALP) and kv_row_ops_neondot.cpp (SDOT, where
// cpu_features().asimd_dot). Internal linkage (see neon_int_dot.h). hd is a multiple of 32.
#pragma once
#include <arm_neon.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backend/cpu/neon_int_dot.h"
#include "core/fp16.h"
#include "quant/blocks.h"

namespace polykv::cpu::neon {
namespace {

inline float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return fp16_to_f32(h);
}

// The 32 signed values of block b, as two vectors (value order).
template <bool kQ4>
void block_values(const uint8_t* row, int b, int8x16_t& lo, int8x16_t& hi) {
  if constexpr (kQ4) {
    const uint8x16_t q = vld1q_u8(row + size_t(b) * sizeof(BlockQ4_0) + 2);
    lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0F))), vdupq_n_s8(8));
    hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), vdupq_n_s8(8));
  } else {
    const int8_t* p = reinterpret_cast<const int8_t*>(row + size_t(b) * sizeof(BlockQ8_0) + 2);
    lo = vld1q_s8(p);
    hi = vld1q_s8(p + 16);
  }
}
template <bool kQ4>
float block_scale(const uint8_t* row, int b) {
  return half_at(row + size_t(b) * (kQ4 ? sizeof(BlockQ4_0) : sizeof(BlockQ8_0)));
}

// One K row against n q8_0 queries: each K block unpacked once for all of them. Per block the exact
// integer dot, then acc += (d_k * d_q) * dot in 4 float lanes (reduced once at the end).
template <typename Ops, bool kQ4>
void quant_dot_n(const uint8_t* k, const uint8_t* qp, size_t q_stride, int n, float* out, int hd) {
  for (int r0 = 0; r0 < n; r0 += 4) {
    const int m = std::min(4, n - r0);
    float32x4_t acc[4] = {vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0)};
    for (int b = 0; b < hd / kQK32; ++b) {
      int8x16_t lo, hi;
      block_values<kQ4>(k, b, lo, hi);
      const float dk = block_scale<kQ4>(k, b);
      for (int r = 0; r < m; ++r) {
        const uint8_t* q = qp + size_t(r0 + r) * q_stride;
        int8x16_t qlo, qhi;
        block_values<false>(q, b, qlo, qhi);
        const int32x4_t s = Ops::dot(Ops::dot(vdupq_n_s32(0), lo, qlo), hi, qhi);
        acc[r] = vfmaq_n_f32(acc[r], vcvtq_f32_s32(s), dk * block_scale<false>(q, b));
      }
    }
    for (int r = 0; r < m; ++r) out[r0 + r] = vaddvq_f32(acc[r]);
  }
}

}  // namespace
}  // namespace polykv::cpu::neon
