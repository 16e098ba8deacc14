// Scalar reference of the ternary layouts (quant/ternary.h): the value order of the base-3 stages,
// TQ2_0's 2-bit planes, and the ggml quantizer (max-abs scale, round half away from zero).
#include "quant/ternary.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/fp16.h"

namespace polykv {
namespace {

// Values of a base-3 packed block: qs in stages of 32/16/8 bytes, then the 4-trit qh bytes.
void base3_values(const uint8_t* qs, int n_qs, const uint8_t* qh, int n_qh, int8_t* t) {
  int j = 0;
  for (const int c : {32, 16, 8})
    for (; j + c <= n_qs; j += c)
      for (int n = 0; n < 5; ++n)
        for (int m = 0; m < c; ++m) *t++ = int8_t(base3_digit(qs[j + m], n) - 1);
  for (int n = 0; n < 4; ++n)
    for (int h = 0; h < n_qh; ++h) *t++ = int8_t(base3_digit(qh[h], n) - 1);
}

// Packs `digits` codes (0..2) taken `stride` values apart, most significant first, into one byte.
uint8_t pack_base3(const uint8_t* codes, int stride, int digits) {
  unsigned q = 0;
  for (int n = 0; n < digits; ++n) q = q * 3 + codes[n * stride];
  if (digits == 4) q *= 3;                 // a fifth digit of 0: 4-trit bytes decode like 5-trit ones
  return uint8_t((q * 256 + 242) / 243);  // ceil(q * 256 / 243), q <= 242
}

void base3_pack(const uint8_t* codes, uint8_t* qs, int n_qs, uint8_t* qh, int n_qh) {
  int j = 0;
  for (const int c : {32, 16, 8})
    for (; j + c <= n_qs; j += c) {
      for (int m = 0; m < c; ++m) qs[j + m] = pack_base3(codes + m, c, 5);
      codes += 5 * c;
    }
  for (int h = 0; h < n_qh; ++h) qh[h] = pack_base3(codes + h, n_qh, 4);
}

}  // namespace

void ternary_block_values(DType type, const void* block, int8_t* t) {
  switch (type) {
    case DType::TQ1_0: {
      const auto& b = *static_cast<const BlockTQ1_0*>(block);
      return base3_values(b.qs, 48, b.qh, 4, t);
    }
    case DType::PTQ1_0: {
      const auto& b = *static_cast<const BlockPTQ1_0*>(block);
      return base3_values(b.qs, 24, b.qh, 2, t);
    }
    case DType::TQ2_0: {
      const auto& b = *static_cast<const BlockTQ2_0*>(block);
      for (int c = 0; c < 2; ++c)
        for (int k = 0; k < 4; ++k)
          for (int j = 0; j < 32; ++j) t[128 * c + 32 * k + j] = int8_t(((b.qs[32 * c + j] >> (2 * k)) & 3) - 1);
      return;
    }
    default: fail("not a ternary type: ", dtype_name(type));
  }
}

void quantize_ternary_block(DType type, const float* x, void* block) {
  const int n = dtype_info(type).block_size;
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  uint8_t codes[256] = {};  // n <= 256 used
  for (int i = 0; i < n; ++i) codes[i] = uint8_t(std::clamp(std::lround(x[i] * id) + 1, 0L, 2L));
  switch (type) {
    case DType::TQ1_0: {
      auto& b = *static_cast<BlockTQ1_0*>(block);
      base3_pack(codes, b.qs, 48, b.qh, 4);
      b.d = f32_to_fp16(d);
      return;
    }
    case DType::PTQ1_0: {
      auto& b = *static_cast<BlockPTQ1_0*>(block);
      base3_pack(codes, b.qs, 24, b.qh, 2);
      b.d = f32_to_fp16(d);
      return;
    }
    case DType::TQ2_0: {
      auto& b = *static_cast<BlockTQ2_0*>(block);
      for (int c = 0; c < 2; ++c)
        for (int j = 0; j < 32; ++j) {
          uint8_t q = 0;
          for (int k = 0; k < 4; ++k) q = uint8_t(q | (codes[128 * c + 32 * k + j] << (2 * k)));
          b.qs[32 * c + j] = q;
        }
      b.d = f32_to_fp16(d);
      return;
    }
    default: fail("not a ternary type: ", dtype_name(type));
  }
}

// The block's fp16 scale: the last two bytes of all three layouts.
float ternary_block_scale(DType type, const uint8_t* block) {
  const int bytes = dtype_info(type).type_size;
  return fp16_to_f32(uint16_t(block[bytes - 2] | (block[bytes - 1] << 8)));
}

void dequantize_ternary_row(DType type, const void* src, float* dst, int64_t n) {
  const DTypeInfo& info = dtype_info(type);
  const uint8_t* b = static_cast<const uint8_t*>(src);
  int8_t t[256];
  for (int64_t i = 0; i < n / info.block_size; ++i, b += info.type_size) {
    ternary_block_values(type, b, t);
    const float d = ternary_block_scale(type, b);
    for (int j = 0; j < info.block_size; ++j) dst[i * info.block_size + j] = float(t[j]) * d;
  }
}

void quantize_ternary_row(DType type, const float* src, void* dst, int64_t n) {
  const DTypeInfo& info = dtype_info(type);
  uint8_t* b = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n / info.block_size; ++i)
    quantize_ternary_block(type, src + i * info.block_size, b + i * info.type_size);
}

}  // namespace polykv
