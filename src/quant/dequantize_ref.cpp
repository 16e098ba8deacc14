// Scalar reference dequantization of every weight type (and q8_K), one function per block layout.
// Semantics are ggml's dequantize_row_* exactly, including the order of float operations (so results
// are bit-identical when neither side contracts a*b+c into an FMA). Clarity over speed: the SIMD
// kernels are tested against these.
#include <cstring>

#include "core/error.h"
#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/kquant_scales.h"
#include "quant/mxfp4.h"
#include "quant/quant.h"
#include "quant/ternary.h"

namespace polykv {
namespace {

// The i-th value's 4-bit quant in the legacy 32-value blocks: values 0..15 are the low nibbles of
// qs[0..15], values 16..31 the high nibbles.
inline int legacy_nibble(const uint8_t* qs, int i) {
  return i < 16 ? (qs[i] & 0x0F) : (qs[i - 16] >> 4);
}

// Fifth bit of value i of q5_0/q5_1: bit i of the little-endian 32-bit qh.
inline int q5_high_bit(const uint8_t qh_bytes[4], int i) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  return int((qh >> i) & 1);
}

void dequantize_q4_0(const BlockQ4_0& b, float* y) {
  const float d = fp16_to_f32(b.d);
  for (int i = 0; i < kQK32; ++i) y[i] = float(legacy_nibble(b.qs, i) - 8) * d;
}

void dequantize_q4_1(const BlockQ4_1& b, float* y) {
  const float d = fp16_to_f32(b.d);
  const float m = fp16_to_f32(b.m);
  for (int i = 0; i < kQK32; ++i) y[i] = float(legacy_nibble(b.qs, i)) * d + m;
}

void dequantize_q5_0(const BlockQ5_0& b, float* y) {
  const float d = fp16_to_f32(b.d);
  for (int i = 0; i < kQK32; ++i) {
    const int q = legacy_nibble(b.qs, i) | (q5_high_bit(b.qh, i) << 4);
    y[i] = float(q - 16) * d;
  }
}

void dequantize_q5_1(const BlockQ5_1& b, float* y) {
  const float d = fp16_to_f32(b.d);
  const float m = fp16_to_f32(b.m);
  for (int i = 0; i < kQK32; ++i) {
    const int q = legacy_nibble(b.qs, i) | (q5_high_bit(b.qh, i) << 4);
    y[i] = float(q) * d + m;
  }
}

void dequantize_q8_0(const BlockQ8_0& b, float* y) {
  const float d = fp16_to_f32(b.d);
  for (int i = 0; i < kQK32; ++i) y[i] = float(b.qs[i]) * d;
}

// q2_K and q3_K share a layout of the 2-bit quants: the super-block is two halves of 128 values;
// in half h, value 32*j + k (j = 0..3, k = 0..31) is bits 2j..2j+1 of qs[32*h + k], and belongs to
// sub-block (of 16 values) 8*h + 2*j + k/16.
struct TwoBitPosition {
  int byte;      // index into qs
  int shift;     // 2*j
  int group;     // 16-value sub-block, 0..15
  int plane;     // 4*h + j: which of the 8 bit planes of q3_K's hmask holds the high bit
  int lane;      // k: byte of hmask
};

inline TwoBitPosition two_bit_position(int i) {
  const int h = i / 128, j = (i % 128) / 32, k = i % 32;
  return {32 * h + k, 2 * j, 8 * h + 2 * j + k / 16, 4 * h + j, k};
}

void dequantize_q2_K(const BlockQ2_K& b, float* y) {
  const float d = fp16_to_f32(b.d);
  const float dmin = fp16_to_f32(b.dmin);
  for (int i = 0; i < kQK_K; ++i) {
    const TwoBitPosition p = two_bit_position(i);
    const uint8_t sc = b.scales[p.group];
    const float dl = d * float(sc & 0x0F);
    const float ml = dmin * float(sc >> 4);
    const int q = (b.qs[p.byte] >> p.shift) & 3;
    y[i] = dl * float(q) - ml;
  }
}

void dequantize_q3_K(const BlockQ3_K& b, float* y) {
  const float d = fp16_to_f32(b.d);
  int8_t scales[16];
  q3k_scales(b.scales, scales);
  for (int i = 0; i < kQK_K; ++i) {
    const TwoBitPosition p = two_bit_position(i);
    const float dl = d * float(scales[p.group]);
    const int low = (b.qs[p.byte] >> p.shift) & 3;
    const bool high_set = (b.hmask[p.lane] >> p.plane) & 1;
    const int q = low - (high_set ? 0 : 4);  // -4..3
    y[i] = dl * float(q);
  }
}

// q4_K / q5_K: 8 sub-blocks of 32 values; sub-block s lives in the nibbles of qs[32*(s/2) .. +32),
// low nibbles for even s, high for odd s. q5_K's fifth bit of value 32*s + k is bit s of qh[k].
inline int k_nibble(const uint8_t* qs, int s, int k) {
  const uint8_t byte = qs[32 * (s / 2) + k];
  return (s % 2 == 0) ? (byte & 0x0F) : (byte >> 4);
}

void dequantize_q4_K(const BlockQ4_K& b, float* y) {
  const float d = fp16_to_f32(b.d);
  const float dmin = fp16_to_f32(b.dmin);
  for (int s = 0; s < 8; ++s) {
    const ScaleMin sm = kquant_scale_min(s, b.scales);
    const float ds = d * float(sm.scale);
    const float ms = dmin * float(sm.min);
    for (int k = 0; k < 32; ++k) y[32 * s + k] = ds * float(k_nibble(b.qs, s, k)) - ms;
  }
}

void dequantize_q5_K(const BlockQ5_K& b, float* y) {
  const float d = fp16_to_f32(b.d);
  const float dmin = fp16_to_f32(b.dmin);
  for (int s = 0; s < 8; ++s) {
    const ScaleMin sm = kquant_scale_min(s, b.scales);
    const float ds = d * float(sm.scale);
    const float ms = dmin * float(sm.min);
    for (int k = 0; k < 32; ++k) {
      const int q = k_nibble(b.qs, s, k) | (((b.qh[k] >> s) & 1) << 4);
      y[32 * s + k] = ds * float(q) - ms;
    }
  }
}

// q6_K: two halves of 128 values; in half h, value 32*g + l (g = 0..3, l = 0..31) has its low 4 bits
// in ql[64*h + 32*(g%2) + l] (low nibble for g < 2, high for g >= 2), its high 2 bits at bits 2g..2g+1
// of qh[32*h + l], and scale scales[8*h + 2*g + l/16]. x = d * scale * (q - 32).
void dequantize_q6_K(const BlockQ6_K& b, float* y) {
  const float d = fp16_to_f32(b.d);
  for (int i = 0; i < kQK_K; ++i) {
    const int h = i / 128, g = (i % 128) / 32, l = i % 32;
    const uint8_t low_byte = b.ql[64 * h + 32 * (g % 2) + l];
    const int low = g < 2 ? (low_byte & 0x0F) : (low_byte >> 4);
    const int high = (b.qh[32 * h + l] >> (2 * g)) & 3;
    const int q = (low | (high << 4)) - 32;
    y[i] = d * float(b.scales[8 * h + 2 * g + l / 16]) * float(q);
  }
}

void dequantize_q8_K(const BlockQ8_K& b, float* y) {
  for (int i = 0; i < kQK_K; ++i) y[i] = b.d * float(b.qs[i]);
}

// Applies one block function to each of the n / values_per_block blocks of a row.
template <typename Block, int values_per_block>
void dequantize_blocks(void (*one)(const Block&, float*), const void* src, float* dst, int64_t n) {
  const Block* blocks = static_cast<const Block*>(src);
  for (int64_t i = 0; i < n / values_per_block; ++i) one(blocks[i], dst + i * values_per_block);
}

}  // namespace

void dequantize_row_ref(DType type, const void* src, float* dst, int64_t n) {
  row_bytes(type, n);  // throws unless n is a whole number of blocks
  switch (type) {
    case DType::F32:
      std::memcpy(dst, src, size_t(n) * sizeof(float));
      return;
    case DType::F16: {
      const uint16_t* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_f32(h[i]);
      return;
    }
    case DType::BF16: {
      const uint16_t* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(h[i]);
      return;
    }
    case DType::Q4_0: return dequantize_blocks<BlockQ4_0, kQK32>(dequantize_q4_0, src, dst, n);
    case DType::Q4_1: return dequantize_blocks<BlockQ4_1, kQK32>(dequantize_q4_1, src, dst, n);
    case DType::Q5_0: return dequantize_blocks<BlockQ5_0, kQK32>(dequantize_q5_0, src, dst, n);
    case DType::Q5_1: return dequantize_blocks<BlockQ5_1, kQK32>(dequantize_q5_1, src, dst, n);
    case DType::Q8_0: return dequantize_blocks<BlockQ8_0, kQK32>(dequantize_q8_0, src, dst, n);
    case DType::Q2_K: return dequantize_blocks<BlockQ2_K, kQK_K>(dequantize_q2_K, src, dst, n);
    case DType::Q3_K: return dequantize_blocks<BlockQ3_K, kQK_K>(dequantize_q3_K, src, dst, n);
    case DType::Q4_K: return dequantize_blocks<BlockQ4_K, kQK_K>(dequantize_q4_K, src, dst, n);
    case DType::Q5_K: return dequantize_blocks<BlockQ5_K, kQK_K>(dequantize_q5_K, src, dst, n);
    case DType::Q6_K: return dequantize_blocks<BlockQ6_K, kQK_K>(dequantize_q6_K, src, dst, n);
    case DType::Q8_K: return dequantize_blocks<BlockQ8_K, kQK_K>(dequantize_q8_K, src, dst, n);
    case DType::TQ1_0: case DType::TQ2_0: case DType::PTQ1_0: return dequantize_ternary_row(type, src, dst, n);
    case DType::MXFP4: return dequantize_mxfp4_row(src, dst, n);
    default:
      fail("dequantize_row_ref: type ", dtype_name(type), " is not supported");
  }
}

}  // namespace polykv
