// Ternary weight types: every value is d * t with t in {-1, 0, +1} and one fp16 scale d per block.
// Layouts are byte-for-byte those of ggml (TQ1_0, TQ2_0: ggml-common.h, gguf-py quants.py) and of
// PrismML's llama.cpp fork (PTQ1_0, ggml type 143: its ggml-common.h / ggml-quants.c). docs/TERNARY.md
// has the layouts with their value order and the sources read.
//
// Base-3 packing (TQ1_0, PTQ1_0): a byte holds 5 trits c_0..c_4 (c = t + 1 in {0, 1, 2}) as
// ceil(q * 256 / 243) with q = Σ c_n * 3^(4-n) (c_0 most significant), so that digit n is
// ((byte * 3^n mod 256) * 3) >> 8: a multiply and a shift. A qh byte holds 4 trits the same way
// (q = Σ c_n 3^(3-n), times 3 before the scaling: a fifth digit of 0).
// Value order: qs is read in stages of 32, 16 and 8 bytes (as many whole stages of each width as
// fit, widest first); in a stage of c bytes at value offset v0, digit n of byte m is value
// v0 + n*c + m. Then digit n of qh[h] is value v0 + n * sizeof(qh) + h.
//   TQ1_0 (256 values): qs[48] = a 32-byte stage (values 0..159), a 16-byte stage (160..239);
//                       qh[4] (240..255); fp16 d.                                       54 bytes
//   PTQ1_0 (128 values): qs[24] = a 16-byte stage (0..79), an 8-byte stage (80..119);
//                       qh[2] (120..127); fp16 d.                                        28 bytes
// TQ2_0 (256 values): qs[64] then fp16 d; value 128*c + 32*k + j is bits 2k..2k+1 of qs[32c + j],
//   a code 0..3 meaning code - 1 (the quantizer writes 0..2; code 3, +2, decodes as gguf-py does). 66 bytes
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "quant/blocks.h"

namespace polykv {

constexpr int kQK_PTQ1_0 = 128;

struct BlockTQ1_0 { uint8_t qs[48]; uint8_t qh[4]; fp16_bits d; };
struct BlockTQ2_0 { uint8_t qs[64]; fp16_bits d; };
struct BlockPTQ1_0 { uint8_t qs[24]; uint8_t qh[2]; fp16_bits d; };
static_assert(sizeof(BlockTQ1_0) == 54 && sizeof(BlockTQ2_0) == 66 && sizeof(BlockPTQ1_0) == 28);

inline bool is_ternary(DType t) { return t == DType::TQ1_0 || t == DType::TQ2_0 || t == DType::PTQ1_0; }

// Digit n (0..4) of a base-3 packed byte: 0, 1 or 2.
inline int base3_digit(uint8_t byte, int n) {
  static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  const uint8_t q = uint8_t(byte * kPow3[n]);  // mod 256
  return (int(q) * 3) >> 8;
}

// The block's values as integers t (value = d * t), in value order: block_size of them, each in
// {-1, 0, 1} (TQ2_0 code 3 gives 2). `type` must be ternary.
void ternary_block_values(DType type, const void* block, int8_t* t);

// The block's scale d (its last two bytes, fp16, in all three layouts).
float ternary_block_scale(DType type, const uint8_t* block);

// Quantizes one block of block_size floats: d = max |x| (ggml's choice for all three types), t =
// round(x / d) (half away from zero, as lroundf), codes c = t + 1 packed as above.
void quantize_ternary_block(DType type, const float* x, void* block);

// Rows of n values (a whole number of blocks): dst = d * t per value; quantize_ternary_block per block.
void dequantize_ternary_row(DType type, const void* src, float* dst, int64_t n);
void quantize_ternary_row(DType type, const float* src, void* dst, int64_t n);

}  // namespace polykv
