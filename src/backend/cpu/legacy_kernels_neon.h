// ARM64 NEON row kernels for the legacy quant weights q4_0, q4_1, q5_0, q5_1, q8_0 and for MXFP4 (Q8_32
// activations, matmul_kernels.h), written once over an integer-dot policy Ops (neon_int_dot.h) and
// instantiated twice: matmul_kernels_neon.cpp (plain ARMv8-A: widening multiplies, SMULL + SADALP)
// and matmul_kernels_neondot.cpp (compiled with +dotprod: SDOT), chosen at run time by
// cpu_features().asimd_dot. Include only from those files. Internal linkage (see neon_int_dot.h).
//
// Per block b and token t the kernel computes the exact integer s = Σ w_i * a_i over the block's 32
// values (q4_0 / q5_0: w = u - 8 / u - 16, the scalar kernel's dot32(u, a) - offset * sum; q8_0: w = q;
// mxfp4: w = kMxfp4Values[code], one TBL;
// q4_1 / q5_1: w = u, the min term coming from the activations' block sum), then the scalar kernel's
// float expression, block after block: each token's sum runs in one fixed order whatever NT is
// (batch invariance, matmul_kernels.h), and it is the scalar kernel's order, so results match the
// scalar reference up to FMA contraction.
#pragma once
#include <arm_neon.h>

#include <cstring>

#include "backend/cpu/matmul_kernels.h"
#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/mxfp4.h"

namespace polykv::cpu::neon {
namespace {

// Nibbles of qs[16]: low nibbles are values 0..15, high nibbles 16..31.
inline void nibbles(const uint8_t* qs, uint8x16_t& lo, uint8x16_t& hi) {
  const uint8x16_t q = vld1q_u8(qs);
  lo = vandq_u8(q, vdupq_n_u8(0x0F));
  hi = vshrq_n_u8(q, 4);
}
// The fifth bits of q5_0 / q5_1 (bit j of qh is value j) as 16 where set: lo values 0..15, hi 16..31.
inline void fifth_bits(const uint8_t* qh, uint8x16_t& lo, uint8x16_t& hi) {
  uint8_t h[4];
  std::memcpy(h, qh, 4);
  const uint8x16_t bit = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  const uint8x16_t sixteen = vdupq_n_u8(16);
  lo = vandq_u8(vtstq_u8(vcombine_u8(vdup_n_u8(h[0]), vdup_n_u8(h[1])), bit), sixteen);
  hi = vandq_u8(vtstq_u8(vcombine_u8(vdup_n_u8(h[2]), vdup_n_u8(h[3])), bit), sixteen);
}

// q4_0 / q5_0: signed values u - 8 / u - 16.
template <typename Block, bool kFiveBit>
struct SymUnpack {
  using B = Block;
  static constexpr bool kMin = false;
  static float scale(const Block& b) { return fp16_to_f32(b.d); }
  static void unpack(const Block& b, int8x16_t& lo, int8x16_t& hi) {
    uint8x16_t l, h;
    nibbles(b.qs, l, h);
    int8_t offset = 8;
    if constexpr (kFiveBit) {
      uint8x16_t fl, fh;
      fifth_bits(b.qh, fl, fh);
      l = vorrq_u8(l, fl);
      h = vorrq_u8(h, fh);
      offset = 16;
    }
    lo = vsubq_s8(vreinterpretq_s8_u8(l), vdupq_n_s8(offset));
    hi = vsubq_s8(vreinterpretq_s8_u8(h), vdupq_n_s8(offset));
  }
};
// q4_1 / q5_1: unsigned values u (0..31), the min m added through the activations' block sums.
template <typename Block, bool kFiveBit>
struct MinUnpack {
  using B = Block;
  static constexpr bool kMin = true;
  static float scale(const Block& b) { return fp16_to_f32(b.d); }
  static void unpack(const Block& b, int8x16_t& lo, int8x16_t& hi) {
    uint8x16_t l, h;
    nibbles(b.qs, l, h);
    if constexpr (kFiveBit) {
      uint8x16_t fl, fh;
      fifth_bits(b.qh, fl, fh);
      l = vorrq_u8(l, fl);
      h = vorrq_u8(h, fh);
    }
    lo = vreinterpretq_s8_u8(l);
    hi = vreinterpretq_s8_u8(h);
  }
};
struct Q8_0Unpack {
  using B = BlockQ8_0;
  static constexpr bool kMin = false;
  static float scale(const B& b) { return fp16_to_f32(b.d); }
  static void unpack(const B& b, int8x16_t& lo, int8x16_t& hi) {
    lo = vld1q_s8(b.qs);
    hi = vld1q_s8(b.qs + 16);
  }
};
// mxfp4: the doubled E2M1 values of the 4-bit codes (|k| <= 12), scale 2^(e - 128).
struct Mxfp4Unpack {
  using B = BlockMXFP4;
  static constexpr bool kMin = false;
  static float scale(const B& b) { return mxfp4_scale(b.e); }
  static void unpack(const B& b, int8x16_t& lo, int8x16_t& hi) {
    const int8x16_t table = vld1q_s8(kMxfp4Values);
    uint8x16_t l, h;
    nibbles(b.qs, l, h);
    lo = vqtbl1q_s8(table, l);
    hi = vqtbl1q_s8(table, h);
  }
};

template <typename Ops, typename U>
struct LegacyRow {
  template <int NT>
  static void run(const void* w_row, const ActRow* act, int64_t n_in, float* out) {
    const typename U::B* w = static_cast<const typename U::B*>(w_row);
    float acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = 0.0f;
    for (int64_t b = 0; b < n_in / 32; ++b) {
      int8x16_t lo, hi;
      U::unpack(w[b], lo, hi);
      const float dw = U::scale(w[b]);
      for (int t = 0; t < NT; ++t) {
        const int8_t* a = act[t].qs + b * 32;
        int32x4_t s = Ops::dot(vdupq_n_s32(0), lo, vld1q_s8(a));
        s = Ops::dot(s, hi, vld1q_s8(a + 16));
        if constexpr (U::kMin)
          acc[t] += dw * act[t].d[b] * float(vaddvq_s32(s)) + fp16_to_f32(w[b].m) * act[t].d[b] * float(act[t].sum[b]);
        else
          acc[t] += dw * act[t].d[b] * float(vaddvq_s32(s));
      }
    }
    for (int t = 0; t < NT; ++t) out[t] = acc[t];
  }
};

// The table of one integer policy: the legacy quants (nullptr for other types).
template <typename Ops>
RowDotFn legacy_kernel(DType type) {
  switch (type) {
    case DType::Q4_0: return by_tokens<LegacyRow<Ops, SymUnpack<BlockQ4_0, false>>>;
    case DType::Q5_0: return by_tokens<LegacyRow<Ops, SymUnpack<BlockQ5_0, true>>>;
    case DType::Q4_1: return by_tokens<LegacyRow<Ops, MinUnpack<BlockQ4_1, false>>>;
    case DType::Q5_1: return by_tokens<LegacyRow<Ops, MinUnpack<BlockQ5_1, true>>>;
    case DType::Q8_0: return by_tokens<LegacyRow<Ops, Q8_0Unpack>>;
    case DType::MXFP4: return by_tokens<LegacyRow<Ops, Mxfp4Unpack>>;
    default: return nullptr;
  }
}

}  // namespace
}  // namespace polykv::cpu::neon
