// ARM64 NEON row kernels for the ternary weight types (ternary_kernels.h), written once over an
// integer-dot policy Ops (neon_int_dot.h) and instantiated twice: ternary_kernels_neon.cpp (plain ARMv8-A)
// and ternary_kernels_neondot.cpp (SDOT). Include only from those files. Internal linkage (see neon_int_dot.h).
//
// Per weight block the values t (-1..1; TQ2_0 code 3 gives 2) are unpacked once, in value order
// (quant/ternary.cpp's ternary_block_values), into an int8 array that every token of the call meets:
//   TQ2_0   (qs >> 2k) & 3, minus 1: a shift and an and per 16 codes;
//   TQ1_0, PTQ1_0  digit n of byte q = ((q * 3^n mod 256) * 3) >> 8: a byte multiply (vmulq_u8 wraps
//           mod 256 as the reference's uint8 product), a widening multiply by 3 and a narrowing shift by 8.
// Then per token the exact int32 Σ t q (Ops::dot, 16 values an instruction) and the scalar kernel's float
// expression per block (or per 32 values for PTQ1_0 against Q8_32), block after block: the integers equal
// the scalar reference's exactly, the floats up to FMA contraction, and token t's sum runs in one order
// whatever the call width (batch invariance, matmul_kernels.h).
#pragma once
#include <arm_neon.h>

#include <cstring>

#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/neon_int_dot.h"
#include "backend/cpu/ternary_kernels.h"
#include "core/fp16.h"
#include "quant/ternary.h"

namespace polykv::cpu::neon {
namespace {

constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};

// Digit n of 16 code bytes, minus 1, as int8.
inline int8x16_t base3_digit16(uint8x16_t q, int n) {
  const uint8x16_t s = vmulq_u8(q, vdupq_n_u8(kPow3[n]));
  const uint8x8_t three = vdup_n_u8(3);
  const uint8x16_t d = vcombine_u8(vshrn_n_u16(vmull_u8(vget_low_u8(s), three), 8),
                                   vshrn_n_u16(vmull_high_u8(s, vdupq_n_u8(3)), 8));
  return vreinterpretq_s8_u8(vsubq_u8(d, vdupq_n_u8(1)));
}
// The same for 8 code bytes.
inline int8x8_t base3_digit8(uint8x8_t q, int n) {
  const uint8x8_t s = vmul_u8(q, vdup_n_u8(kPow3[n]));
  const uint8x8_t d = vshrn_n_u16(vmull_u8(s, vdup_n_u8(3)), 8);
  return vreinterpret_s8_u8(vsub_u8(d, vdup_n_u8(1)));
}

// quant/ternary.cpp's base3_values: stages of 32, 16, 8 code bytes (digit n of byte m of a stage of
// width c at value n * c + m of the stage), then n_qh bytes of 4 digits (digit n of byte h at n * n_qh + h).
inline void base3_unpack(const uint8_t* qs, int n_qs, const uint8_t* qh, int n_qh, int8_t* t) {
  int j = 0;
  for (; j + 32 <= n_qs; j += 32, t += 160) {
    const uint8x16_t a = vld1q_u8(qs + j), b = vld1q_u8(qs + j + 16);
    for (int n = 0; n < 5; ++n) vst1q_s8(t + 32 * n, base3_digit16(a, n)), vst1q_s8(t + 32 * n + 16, base3_digit16(b, n));
  }
  for (; j + 16 <= n_qs; j += 16, t += 80) {
    const uint8x16_t a = vld1q_u8(qs + j);
    for (int n = 0; n < 5; ++n) vst1q_s8(t + 16 * n, base3_digit16(a, n));
  }
  for (; j + 8 <= n_qs; j += 8, t += 40) {
    const uint8x8_t a = vld1_u8(qs + j);
    for (int n = 0; n < 5; ++n) vst1_s8(t + 8 * n, base3_digit8(a, n));
  }
  uint8_t h[8] = {};
  std::memcpy(h, qh, size_t(n_qh));  // n_qh <= 4
  const uint8x8_t hv = vld1_u8(h);
  for (int n = 0; n < 4; ++n) {
    int8_t d[8];
    vst1_s8(d, base3_digit8(hv, n));
    std::memcpy(t + n * n_qh, d, size_t(n_qh));
  }
}

inline void tq2_unpack(const uint8_t* qs, int8_t* t) {
  const uint8x16_t three = vdupq_n_u8(3), one = vdupq_n_u8(1);
  for (int c = 0; c < 2; ++c)
    for (int h = 0; h < 2; ++h) {
      const uint8x16_t q = vld1q_u8(qs + 32 * c + 16 * h);
      vst1q_s8(t + 128 * c + 16 * h, vreinterpretq_s8_u8(vsubq_u8(vandq_u8(q, three), one)));
      vst1q_s8(t + 128 * c + 32 + 16 * h, vreinterpretq_s8_u8(vsubq_u8(vandq_u8(vshrq_n_u8(q, 2), three), one)));
      vst1q_s8(t + 128 * c + 64 + 16 * h, vreinterpretq_s8_u8(vsubq_u8(vandq_u8(vshrq_n_u8(q, 4), three), one)));
      vst1q_s8(t + 128 * c + 96 + 16 * h, vreinterpretq_s8_u8(vsubq_u8(vshrq_n_u8(q, 6), one)));
    }
}

// Σ t[i] q[i] over n values (a multiple of 32), exact.
template <class Ops>
inline int32_t dot_i8(const int8_t* t, const int8_t* q, int n) {
  int32x4_t a0 = vdupq_n_s32(0), a1 = vdupq_n_s32(0);
  for (int i = 0; i < n; i += 32) {
    a0 = Ops::dot(a0, vld1q_s8(t + i), vld1q_s8(q + i));
    a1 = Ops::dot(a1, vld1q_s8(t + i + 16), vld1q_s8(q + i + 16));
  }
  return vaddvq_s32(vaddq_s32(a0, a1));
}

// TQ1_0 / TQ2_0 against Q8_K (ternary_kernels_scalar.cpp's TernaryQ8K, the same expression per block).
template <class Ops, DType kType>
struct TernaryQ8KNeon {
  template <int NT>
  static void run(const void* w_row, const ActRow* a, int64_t n, float* out) {
    constexpr int kBytes = kType == DType::TQ1_0 ? int(sizeof(BlockTQ1_0)) : int(sizeof(BlockTQ2_0));
    const uint8_t* w = static_cast<const uint8_t*>(w_row);
    float acc[NT] = {};
    alignas(16) int8_t t[256];
    for (int64_t b = 0; b < n / 256; ++b, w += kBytes) {
      if constexpr (kType == DType::TQ1_0) {
        const auto* blk = reinterpret_cast<const BlockTQ1_0*>(w);
        base3_unpack(blk->qs, 48, blk->qh, 4, t);
      } else {
        tq2_unpack(reinterpret_cast<const BlockTQ2_0*>(w)->qs, t);
      }
      const float d = ternary_block_scale(kType, w);
      for (int k = 0; k < NT; ++k) {
        const int32_t s = dot_i8<Ops>(t, a[k].qs + b * 256, 256);
        acc[k] += d * a[k].d[b] * float(s);
      }
    }
    for (int k = 0; k < NT; ++k) out[k] = acc[k];
  }
};

// PTQ1_0 against Q8_K (rows of whole 256s, ptq1_0_reads_q8_K) or Q8_32 (ternary_kernels_scalar.cpp's Ptq1Q8_32).
template <class Ops>
struct Ptq1Neon {
  template <int NT>
  static void run(const void* w_row, const ActRow* a, int64_t n, float* out) {
    const BlockPTQ1_0* w = static_cast<const BlockPTQ1_0*>(w_row);
    float acc[NT] = {};
    alignas(16) int8_t t[kQK_PTQ1_0];
    const bool q8k = ptq1_0_reads_q8_K(n);
    for (int64_t b = 0; b < n / kQK_PTQ1_0; ++b) {
      base3_unpack(w[b].qs, 24, w[b].qh, 2, t);
      const float d = fp16_to_f32(w[b].d);
      for (int k = 0; k < NT; ++k) {
        const int8_t* q = a[k].qs + b * kQK_PTQ1_0;
        if (q8k) {
          acc[k] += d * a[k].d[b / 2] * float(dot_i8<Ops>(t, q, kQK_PTQ1_0));
        } else {
          for (int j = 0; j < 4; ++j) acc[k] += d * a[k].d[4 * b + j] * float(dot_i8<Ops>(t + 32 * j, q + 32 * j, 32));
        }
      }
    }
    for (int k = 0; k < NT; ++k) out[k] = acc[k];
  }
};

template <class Ops>
RowDotFn ternary_kernel(DType type) {
  switch (type) {
    case DType::TQ1_0: return by_tokens<TernaryQ8KNeon<Ops, DType::TQ1_0>>;
    case DType::TQ2_0: return by_tokens<TernaryQ8KNeon<Ops, DType::TQ2_0>>;
    case DType::PTQ1_0: return by_tokens<Ptq1Neon<Ops>>;
    default: return nullptr;
  }
}

}  // namespace
}  // namespace polykv::cpu::neon
