// Block layouts of the ggml weight types, byte-for-byte (GGUF files store these). Sizes are checked
// against core/dtype.cpp's table by static_asserts. Halves are IEEE fp16 bit patterns.
#pragma once
#include <cstdint>

namespace polykv {

using fp16_bits = uint16_t;

constexpr int kQK32 = 32;   // values per block of the legacy types
constexpr int kQK_K = 256;  // values per super-block of the k-quants
constexpr int kKScaleBytes = 12;

struct BlockQ4_0 { fp16_bits d; uint8_t qs[kQK32 / 2]; };             // x = d * (q - 8)
struct BlockQ4_1 { fp16_bits d, m; uint8_t qs[kQK32 / 2]; };          // x = d * q + m
struct BlockQ5_0 { fp16_bits d; uint8_t qh[4]; uint8_t qs[kQK32 / 2]; };     // x = d * (q - 16)
struct BlockQ5_1 { fp16_bits d, m; uint8_t qh[4]; uint8_t qs[kQK32 / 2]; };  // x = d * q + m
struct BlockQ8_0 { fp16_bits d; int8_t qs[kQK32]; };                  // x = d * q
struct BlockQ8_1 { fp16_bits d, s; int8_t qs[kQK32]; };               // s = d * sum(q)

// Low nibble of qs[j] is value j, high nibble is value j + 16 (q4_0/q4_1/q5_0/q5_1);
// q5's fifth bit of value j is bit j of the 32-bit little-endian qh.

struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];  // low 4 bits: scale, high 4 bits: min, per 16 values
  uint8_t qs[kQK_K / 4];       // 2-bit quants
  fp16_bits d, dmin;           // super-block scale for scales / mins
};
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];  // high bit of the 3-bit quants
  uint8_t qs[kQK_K / 4];     // low 2 bits
  uint8_t scales[kKScaleBytes];  // 16 6-bit scales, packed
  fp16_bits d;
};
struct BlockQ4_K {
  fp16_bits d, dmin;
  uint8_t scales[kKScaleBytes];  // 8 6-bit scales and 8 6-bit mins, packed
  uint8_t qs[kQK_K / 2];
};
struct BlockQ5_K {
  fp16_bits d, dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];  // low 4 bits
  uint8_t qh[kQK_K / 4];  // high 2 bits
  int8_t scales[kQK_K / 16];
  fp16_bits d;
};
struct BlockQ8_K {  // activations for k-quant dot products
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];  // sum of qs per 16 values
};

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
              sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34 && sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144 &&
              sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 && sizeof(BlockQ8_K) == 292);

}  // namespace polykv
