// ARM64 NEON decoder of trellis-coded turbo rows into the rotated basis (layout in turbo_trellis.h; the
// scalar decode_rotated in turbo_trellis.cpp is the reference, turbo_trellis_avx2.cpp the same steps
// on x86). 8 coordinates at a time, as two vectors of 4 lanes:
//   window w_j = bits [i+j-3, i+j] of the t stream: one 16-bit word of t bits i-8..i+7, shifted right
//                by 5+j per lane (USHL by a negative count), masked to 4 bits;
//   subset     = 2 bits of the constant kSubsetWord at 2*w;
//   index j    = the (bits-1)-bit index of each lane, unpacked by a variable shift;
//   level k    = subset + 4*j, looked up with TBL in the level table's bytes (32, 64 or 2 x 64 bytes):
//                lane k becomes the byte indices 4k .. 4k+3.
// The result is norm * level, one multiply: bit-identical to the reference.
#include <arm_neon.h>

#include <cstring>

#include "quant/turbo.h"
#include "quant/turbo_trellis.h"
#include "quant/turbo_trellis_internal.h"

namespace polykv::turbo::trellis {
namespace {

// The level table as bytes: 2^(kBits+1) floats = 32, 64 or 128 bytes, in 16-byte registers.
template <int kBits>
struct LevelBytes {
  static constexpr int kRegs = (8 << kBits) / 16;  // 2, 4, 8
  uint8x16_t r[kRegs];
  explicit LevelBytes(const float* lv) {
    for (int i = 0; i < kRegs; ++i) r[i] = vld1q_u8(reinterpret_cast<const uint8_t*>(lv) + 16 * i);
  }
  // Floats at the level indices k (4 lanes).
  float32x4_t lookup(uint32x4_t k) const {
    // Lane k -> bytes 4k, 4k+1, 4k+2, 4k+3 (little endian; 4k+3 < 128, no carries).
    const uint8x16_t idx = vreinterpretq_u8_u32(vmlaq_n_u32(vdupq_n_u32(0x03020100u), k, 0x04040404u));
    if constexpr (kBits == 2) {
      return vreinterpretq_f32_u8(vqtbl2q_u8(uint8x16x2_t{{r[0], r[1]}}, idx));
    } else if constexpr (kBits == 3) {
      return vreinterpretq_f32_u8(vqtbl4q_u8(uint8x16x4_t{{r[0], r[1], r[2], r[3]}}, idx));
    } else {  // out-of-range indices give 0 in TBL: the two halves OR together
      const uint8x16_t lo = vqtbl4q_u8(uint8x16x4_t{{r[0], r[1], r[2], r[3]}}, idx);
      const uint8x16_t hi = vqtbl4q_u8(uint8x16x4_t{{r[4], r[5], r[6], r[7]}}, vsubq_u8(idx, vdupq_n_u8(64)));
      return vreinterpretq_f32_u8(vorrq_u8(lo, hi));
    }
  }
};

template <int kBits>
void decode_groups(const uint8_t* src, float* y, int head_dim) {
  constexpr int w = kBits - 1;
  const detail::Shape s = detail::shape(kBits, head_dim);  // head_dim was validated when the row was made
  const LevelBytes<kBits> table(detail::level_table(kBits, s.group));
  const int32x4_t window_shift[2] = {{-5, -6, -7, -8}, {-9, -10, -11, -12}};
  const int32x4_t index_shift[2] = {{0, -w, -2 * w, -3 * w}, {-4 * w, -5 * w, -6 * w, -7 * w}};
  const uint32x4_t subsets = vdupq_n_u32(kSubsetWord), three = vdupq_n_u32(3), fifteen = vdupq_n_u32(15);
  const uint32x4_t index_mask = vdupq_n_u32((1u << w) - 1);
  for (int g = 0; g < s.n_groups; ++g) {
    const detail::Record r = detail::record(src, s, g);
    const float32x4_t norm = vdupq_n_f32(r.norm);
    float* out = y + g * s.group;
    for (int i = 0; i < s.group; i += 8) {
      const uint32_t t = (i ? uint32_t(r.tbits[i / 8 - 1]) : 0u) | (uint32_t(r.tbits[i / 8]) << 8);
      uint32_t word = 0;
      std::memcpy(&word, r.jbits + w * i / 8, size_t(w));  // the 8 indices' w bytes
      for (int h = 0; h < 2; ++h) {
        const uint32x4_t win = vandq_u32(vshlq_u32(vdupq_n_u32(t), window_shift[h]), fifteen);
        const uint32x4_t subset =
            vandq_u32(vshlq_u32(subsets, vnegq_s32(vreinterpretq_s32_u32(vshlq_n_u32(win, 1)))), three);
        const uint32x4_t index = vandq_u32(vshlq_u32(vdupq_n_u32(word), index_shift[h]), index_mask);
        const uint32x4_t k = vaddq_u32(subset, vshlq_n_u32(index, 2));
        vst1q_f32(out + i + 4 * h, vmulq_f32(norm, table.lookup(k)));
      }
    }
  }
}

void decode_rotated_neon(int bits, const uint8_t* src, float* y, int head_dim) {
  if (bits == 2) return decode_groups<2>(src, y, head_dim);
  if (bits == 3) return decode_groups<3>(src, y, head_dim);
  return decode_groups<4>(src, y, head_dim);
}

}  // namespace

DecodeFn decode_rotated_neon_kernel() { return decode_rotated_neon; }

}  // namespace polykv::turbo::trellis
