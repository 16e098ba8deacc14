// ARM64 NEON row kernels for the k-quant weights (q2_K, q3_K, q4_K, q5_K, q6_K) against Q8_K
// activations (matmul_kernels.h), written once over an integer-dot policy Ops (neon_int_dot.h) and
// instantiated twice: kquant_kernels_neon.cpp (plain ARMv8-A) and kquant_kernels_neondot.cpp (SDOT).
// Include only from those files. Internal linkage (see neon_int_dot.h).
//
// Per super-block of 256 values the weights are unpacked once into 16 vectors w[k] of 16 int8 values
// (values 16k .. 16k+15; q3_K and q6_K already offset to signed u - 4 and u - 32) plus integer scales,
// then every token of the call meets them:
//   q4_K, q5_K: sum_q = Σ_j sc[j] * Σ_{32 values of sub-block j} u * a,  sum_m = Σ_j m[j] * bsum32[j]
//   q2_K:       sum_q = Σ_k sc[k] * Σ_{16 values of sub-block k} u * a,  sum_m = Σ_k m[k] * bsums[k]
//   q3_K, q6_K: sum   = Σ_k s[k] * Σ_{16 values} (u - off) * a          (= the scalar Σ s*(dot - off*bsum))
// All of it exact int32 arithmetic (the integers of kquant_kernels_scalar.cpp; |u*a| <= 64 * 128 fits
// the plain path's int16 products), then the scalar kernel's float expression per block, block after
// block: results equal the scalar reference up to FMA contraction, and token t's sum runs in one
// order whatever the call width (batch invariance, matmul_kernels.h).
#pragma once
#include <arm_neon.h>

#include "backend/cpu/kernel_kquant_scales.h"
#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/neon_int_dot.h"
#include "core/fp16.h"
#include "quant/blocks.h"

namespace polykv::cpu::neon {
namespace {

// One super-block, unpacked. sc: per-32 scales in sc[0..1] (kSub32 types) or per-16 in sc[0..3];
// m: per-32 mins in m[0] (kSub32) or per-16 in m[0..1] (q2_K); unused parts are left unset.
struct KBlock {
  int8x16_t w[16];
  int32x4_t sc[4];
  int16x8_t m[2];
  float d = 0.0f, dmin = 0.0f;
};

// 16 int8 -> 4 x 4 int32.
inline void widen4(int8x16_t v, int32x4_t* o) {
  const int16x8_t lo = vmovl_s8(vget_low_s8(v)), hi = vmovl_high_s8(v);
  o[0] = vmovl_s16(vget_low_s16(lo));
  o[1] = vmovl_high_s16(lo);
  o[2] = vmovl_s16(vget_low_s16(hi));
  o[3] = vmovl_high_s16(hi);
}
// 8 uint8 -> 2 x 4 int32 (values < 128).
inline void widen2(const uint8_t* p, int32x4_t* o) {
  const uint16x8_t v = vmovl_u8(vld1_u8(p));
  o[0] = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(v)));
  o[1] = vreinterpretq_s32_u32(vmovl_high_u16(v));
}
// val where bit `mask` of h is set, else 0 (q5_K's fifth bit as 16, q3_K's high bit as 4).
inline uint8x16_t bit_to(uint8x16_t h, uint8_t mask, uint8_t val) {
  return vandq_u8(vtstq_u8(h, vdupq_n_u8(mask)), vdupq_n_u8(val));
}

template <typename Block, bool kFiveBit>
struct Q45K {
  using B = Block;
  static constexpr bool kSub32 = true, kMins = true;
  static void unpack(const Block& x, KBlock& k) {
    uint8_t sc[8], m[8];
    unpack_scales_mins_k4(x.scales, sc, m);
    widen2(sc, k.sc);
    k.m[0] = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(m)));
    uint8x16_t h0 = vdupq_n_u8(0), h1 = vdupq_n_u8(0);
    if constexpr (kFiveBit) {
      h0 = vld1q_u8(x.qh);
      h1 = vld1q_u8(x.qh + 16);
    }
    const uint8x16_t lo4 = vdupq_n_u8(0x0F);
    for (int j = 0; j < 4; ++j) {  // qs[32j .. 32j+31]: low nibbles sub-block 2j, high 2j+1
      const uint8x16_t q0 = vld1q_u8(x.qs + 32 * j), q1 = vld1q_u8(x.qs + 32 * j + 16);
      uint8x16_t a0 = vandq_u8(q0, lo4), a1 = vandq_u8(q1, lo4), b0 = vshrq_n_u8(q0, 4), b1 = vshrq_n_u8(q1, 4);
      if constexpr (kFiveBit) {
        const uint8_t ml = uint8_t(1u << (2 * j)), mh = uint8_t(1u << (2 * j + 1));
        a0 = vorrq_u8(a0, bit_to(h0, ml, 16));
        a1 = vorrq_u8(a1, bit_to(h1, ml, 16));
        b0 = vorrq_u8(b0, bit_to(h0, mh, 16));
        b1 = vorrq_u8(b1, bit_to(h1, mh, 16));
      }
      k.w[4 * j] = vreinterpretq_s8_u8(a0);
      k.w[4 * j + 1] = vreinterpretq_s8_u8(a1);
      k.w[4 * j + 2] = vreinterpretq_s8_u8(b0);
      k.w[4 * j + 3] = vreinterpretq_s8_u8(b1);
    }
    k.d = fp16_to_f32(x.d);
    k.dmin = fp16_to_f32(x.dmin);
  }
};

struct Q6K {
  using B = BlockQ6_K;
  static constexpr bool kSub32 = false, kMins = false;
  static void unpack(const BlockQ6_K& x, KBlock& k) {
    const uint8x16_t lo4 = vdupq_n_u8(0x0F), hi2 = vdupq_n_u8(0x30);
    const int8x16_t off = vdupq_n_s8(32);
    for (int h = 0; h < 2; ++h) {  // values 128h ..: ql[64h ..], qh[32h ..]
      const uint8_t* ql = x.ql + 64 * h;
      const uint8x16_t l0 = vld1q_u8(ql), l1 = vld1q_u8(ql + 16), l2 = vld1q_u8(ql + 32), l3 = vld1q_u8(ql + 48);
      const uint8x16_t q0 = vld1q_u8(x.qh + 32 * h), q1 = vld1q_u8(x.qh + 32 * h + 16);
      const uint8x16_t u[8] = {
          vorrq_u8(vandq_u8(l0, lo4), vandq_u8(vshlq_n_u8(q0, 4), hi2)),  // qh bits 0..1
          vorrq_u8(vandq_u8(l1, lo4), vandq_u8(vshlq_n_u8(q1, 4), hi2)),
          vorrq_u8(vandq_u8(l2, lo4), vandq_u8(vshlq_n_u8(q0, 2), hi2)),  // bits 2..3
          vorrq_u8(vandq_u8(l3, lo4), vandq_u8(vshlq_n_u8(q1, 2), hi2)),
          vorrq_u8(vshrq_n_u8(l0, 4), vandq_u8(q0, hi2)),  // bits 4..5
          vorrq_u8(vshrq_n_u8(l1, 4), vandq_u8(q1, hi2)),
          vorrq_u8(vshrq_n_u8(l2, 4), vandq_u8(vshrq_n_u8(q0, 2), hi2)),  // bits 6..7
          vorrq_u8(vshrq_n_u8(l3, 4), vandq_u8(vshrq_n_u8(q1, 2), hi2)),
      };
      for (int i = 0; i < 8; ++i) k.w[8 * h + i] = vsubq_s8(vreinterpretq_s8_u8(u[i]), off);
    }
    widen4(vld1q_s8(x.scales), k.sc);
    k.d = fp16_to_f32(x.d);
  }
};

// Shifts right by 2j (j < 4) without an immediate: the q2_K / q3_K crumbs.
inline uint8x16_t crumb(uint8x16_t q, int j) {
  return vandq_u8(vshlq_u8(q, vdupq_n_s8(int8_t(-2 * j))), vdupq_n_u8(3));
}

struct Q2K {
  using B = BlockQ2_K;
  static constexpr bool kSub32 = false, kMins = true;
  static void unpack(const BlockQ2_K& x, KBlock& k) {
    for (int h = 0; h < 2; ++h) {  // values 128h + 32j + l: crumb j of qs[32h + l]
      const uint8x16_t q0 = vld1q_u8(x.qs + 32 * h), q1 = vld1q_u8(x.qs + 32 * h + 16);
      for (int j = 0; j < 4; ++j) {
        k.w[8 * h + 2 * j] = vreinterpretq_s8_u8(crumb(q0, j));
        k.w[8 * h + 2 * j + 1] = vreinterpretq_s8_u8(crumb(q1, j));
      }
    }
    const uint8x16_t s = vld1q_u8(x.scales);
    widen4(vreinterpretq_s8_u8(vandq_u8(s, vdupq_n_u8(0x0F))), k.sc);
    const uint8x16_t m = vshrq_n_u8(s, 4);
    k.m[0] = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(m)));
    k.m[1] = vreinterpretq_s16_u16(vmovl_high_u8(m));
    k.d = fp16_to_f32(x.d);
    k.dmin = fp16_to_f32(x.dmin);
  }
};

struct Q3K {
  using B = BlockQ3_K;
  static constexpr bool kSub32 = false, kMins = false;
  static void unpack(const BlockQ3_K& x, KBlock& k) {
    const uint8x16_t m0 = vld1q_u8(x.hmask), m1 = vld1q_u8(x.hmask + 16);
    const int8x16_t off = vdupq_n_s8(4);
    for (int h = 0; h < 2; ++h) {  // value 128h + 32j + l: crumb j of qs[32h + l], bit 4h+j of hmask[l]
      const uint8x16_t q0 = vld1q_u8(x.qs + 32 * h), q1 = vld1q_u8(x.qs + 32 * h + 16);
      for (int j = 0; j < 4; ++j) {
        const uint8_t bit = uint8_t(1u << (4 * h + j));
        k.w[8 * h + 2 * j] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(crumb(q0, j), bit_to(m0, bit, 4))), off);
        k.w[8 * h + 2 * j + 1] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(crumb(q1, j), bit_to(m1, bit, 4))), off);
      }
    }
    int8_t s[16];
    unpack_scales_q3_K(x.scales, s);
    widen4(vld1q_s8(s), k.sc);
    k.d = fp16_to_f32(x.d);
  }
};

// Σ lanes of each of 4 vectors -> one vector of the 4 totals.
inline int32x4_t totals4(int32x4_t a, int32x4_t b, int32x4_t c, int32x4_t d) {
  return vpaddq_s32(vpaddq_s32(a, b), vpaddq_s32(c, d));
}

// Σ scale * (sub-block dot) over one super-block for one token's activations a[256].
template <typename Ops, bool kSub32>
inline int32_t scaled_dot(const KBlock& k, const int8_t* a) {
  const int32x4_t z = vdupq_n_s32(0);
  if constexpr (kSub32) {
    int32x4_t s[8];
    for (int j = 0; j < 8; ++j)
      s[j] = Ops::dot(Ops::dot(z, k.w[2 * j], vld1q_s8(a + 32 * j)), k.w[2 * j + 1], vld1q_s8(a + 32 * j + 16));
    const int32x4_t p = vmulq_s32(totals4(s[0], s[1], s[2], s[3]), k.sc[0]);
    return vaddvq_s32(vmlaq_s32(p, totals4(s[4], s[5], s[6], s[7]), k.sc[1]));
  } else {
    int32x4_t s[16];
    for (int i = 0; i < 16; ++i) s[i] = Ops::dot(z, k.w[i], vld1q_s8(a + 16 * i));
    int32x4_t p = vmulq_s32(totals4(s[0], s[1], s[2], s[3]), k.sc[0]);
    p = vmlaq_s32(p, totals4(s[4], s[5], s[6], s[7]), k.sc[1]);
    p = vmlaq_s32(p, totals4(s[8], s[9], s[10], s[11]), k.sc[2]);
    return vaddvq_s32(vmlaq_s32(p, totals4(s[12], s[13], s[14], s[15]), k.sc[3]));
  }
}

// Σ min * bsum: per-32 (bsums paired) for kSub32, per-16 otherwise. bs: the super-block's 16 bsums.
template <bool kSub32>
inline int32_t min_dot(const KBlock& k, const int16_t* bs) {
  const int16x8_t b0 = vld1q_s16(bs), b1 = vld1q_s16(bs + 8);
  if constexpr (kSub32) {
    const int16x8_t pb = vpaddq_s16(b0, b1);  // bs[2j] + bs[2j+1], |.| <= 32 * 128
    return vaddvq_s32(vmlal_high_s16(vmull_s16(vget_low_s16(pb), vget_low_s16(k.m[0])), pb, k.m[0]));
  } else {
    int32x4_t s = vmull_s16(vget_low_s16(b0), vget_low_s16(k.m[0]));
    s = vmlal_high_s16(s, b0, k.m[0]);
    s = vmlal_s16(s, vget_low_s16(b1), vget_low_s16(k.m[1]));
    return vaddvq_s32(vmlal_high_s16(s, b1, k.m[1]));
  }
}

template <typename Ops, typename T>
struct KquantRow {
  template <int NT>
  static void run(const void* w_row, const ActRow* act, int64_t n_in, float* out) {
    const typename T::B* w = static_cast<const typename T::B*>(w_row);
    float acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = 0.0f;
    KBlock k;
    for (int64_t b = 0; b < n_in / kQK_K; ++b) {
      T::unpack(w[b], k);
      for (int t = 0; t < NT; ++t) {
        const int32_t sum_q = scaled_dot<Ops, T::kSub32>(k, act[t].qs + b * kQK_K);
        if constexpr (T::kMins) {
          const int32_t sum_m = min_dot<T::kSub32>(k, act[t].bsums + b * 16);
          acc[t] += act[t].d[b] * (k.d * float(sum_q) - k.dmin * float(sum_m));
        } else {
          acc[t] += act[t].d[b] * k.d * float(sum_q);
        }
      }
    }
    for (int t = 0; t < NT; ++t) out[t] = acc[t];
  }
};

// The k-quant table of one integer policy (nullptr for other types).
template <typename Ops>
RowDotFn kquant_kernel(DType type) {
  switch (type) {
    case DType::Q2_K: return by_tokens<KquantRow<Ops, Q2K>>;
    case DType::Q3_K: return by_tokens<KquantRow<Ops, Q3K>>;
    case DType::Q4_K: return by_tokens<KquantRow<Ops, Q45K<BlockQ4_K, false>>>;
    case DType::Q5_K: return by_tokens<KquantRow<Ops, Q45K<BlockQ5_K, true>>>;
    case DType::Q6_K: return by_tokens<KquantRow<Ops, Q6K>>;
    default: return nullptr;
  }
}

}  // namespace
}  // namespace polykv::cpu::neon
