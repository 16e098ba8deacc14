// ARM64 NEON row kernels for q4_0 and q8_0 weights (Q8_32 activations, matmul_kernels.h), written
// once over an integer-dot policy Ops and instantiated twice: matmul_kernels_neon.cpp (plain
// ARMv8-A: widening multiplies, SMULL + SADALP) and matmul_kernels_neondot.cpp (compiled with
// +dotprod: SDOT), chosen at run time by cpu_features().asimd_dot. Include only from those files.
//
// Per block b and token t the kernel computes the exact integer s = Σ w_i * a_i over the block's 32
// values (w = q - 8 for q4_0, q for q8_0: the same integer as the scalar kernel's dot32(u, a) - 8 * sum),
// then acc[t] += (d_w * d_a[b]) * float(s) in scalar float, block after block: each token's sum runs
// in one fixed order whatever NT is (batch invariance, matmul_kernels.h), and it is the scalar
// kernel's order, so results match the scalar reference up to FMA contraction.
//
// Ops: an integer-dot policy of neon_int_dot.h.
#pragma once
#include <arm_neon.h>

#include "backend/cpu/matmul_kernels.h"
#include "core/fp16.h"
#include "quant/blocks.h"

namespace polykv::cpu::neon {

// q4_0: nibbles to signed values q - 8 (low nibbles: values 0..15, high: 16..31).
struct Q4_0Unpack {
  using Block = BlockQ4_0;
  static void unpack(const Block& b, int8x16_t& lo, int8x16_t& hi) {
    const uint8x16_t q = vld1q_u8(b.qs);
    const int8x16_t eight = vdupq_n_s8(8);
    lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0F))), eight);
    hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), eight);
  }
};
struct Q8_0Unpack {
  using Block = BlockQ8_0;
  static void unpack(const Block& b, int8x16_t& lo, int8x16_t& hi) {
    lo = vld1q_s8(b.qs);
    hi = vld1q_s8(b.qs + 16);
  }
};

template <typename Ops, typename U>
struct LegacyRow {
  template <int NT>
  static void run(const void* w_row, const ActRow* act, int64_t n_in, float* out) {
    const typename U::Block* w = static_cast<const typename U::Block*>(w_row);
    float acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = 0.0f;
    for (int64_t b = 0; b < n_in / 32; ++b) {
      int8x16_t lo, hi;
      U::unpack(w[b], lo, hi);
      const float dw = fp16_to_f32(w[b].d);
      for (int t = 0; t < NT; ++t) {
        const int8_t* a = act[t].qs + b * 32;
        int32x4_t s = Ops::dot(vdupq_n_s32(0), lo, vld1q_s8(a));
        s = Ops::dot(s, hi, vld1q_s8(a + 16));
        acc[t] += dw * act[t].d[b] * float(vaddvq_s32(s));
      }
    }
    for (int t = 0; t < NT; ++t) out[t] = acc[t];
  }
};

// The table of one integer policy: q4_0 and q8_0 (nullptr for other types).
template <typename Ops>
RowDotFn legacy_kernel(DType type) {
  switch (type) {
    case DType::Q4_0: return by_tokens<LegacyRow<Ops, Q4_0Unpack>>;
    case DType::Q8_0: return by_tokens<LegacyRow<Ops, Q8_0Unpack>>;
    default: return nullptr;
  }
}

}  // namespace polykv::cpu::neon
