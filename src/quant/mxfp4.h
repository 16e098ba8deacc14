// MXFP4 (ggml type 39), the type real gpt-oss GGUFs store their expert weights in: the OCP
// Microscaling MX format with FP4 (E2M1) elements, in ggml's block layout (ggml-common.h
// block_mxfp4, gguf-py quants.py class MXFP4; docs/MOE.md "MXFP4" has the sources read).
//
// Block of 32 values, 17 bytes: e (1 byte, E8M0 shared exponent), then qs[16]; value j (j < 16) is the
// low nibble of qs[j], value j + 16 its high nibble (the nibble order of q4_0).
// A nibble c is an E2M1 code: bit 3 the sign, bits 0..2 the magnitude {0, 0.5, 1, 1.5, 2, 3, 4, 6}.
// ggml stores the doubled values as int8 (kMxfp4Values: {0, 1, 2, 3, 4, 6, 8, 12} and their negatives;
// code 8 is -0 = 0), so value = kMxfp4Values[c] * 2^(e - 128): E8M0's 2^(e - 127) halved.
// e = 0 and 1 give the subnormal floats 2^-128 and 2^-127 (exact), e = 255 gives 2^127 (ggml's
// reading; OCP reserves 255 for NaN, which ggml never produces).
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace polykv {

constexpr int kQK_MXFP4 = 32;
struct BlockMXFP4 {
  uint8_t e;       // E8M0 exponent: scale 2^(e - 128) for the doubled values
  uint8_t qs[16];  // value j: low nibble of qs[j]; value j + 16: high nibble
};
static_assert(sizeof(BlockMXFP4) == 17);

// E2M1 codes doubled (exact small integers), indexed by the 4-bit code.
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// 2^(e - 128) as a float (exact for every e, subnormal for e < 2).
float mxfp4_scale(uint8_t e);

// Rows of n values (a multiple of 32).
void dequantize_mxfp4_row(const void* src, float* dst, int64_t n);
// ggml's reference quantizer: per block, e = floor(log2(max |x|)) - 2 + 127 (0 for an all-zero block;
// clamped to 0..255 where ggml's uint8 cast would wrap, i.e. only for max |x| < 2^-125), then each
// value's code is the first of the 16 whose kMxfp4Values[c] * 2^(e - 128) is nearest (ties: the lower
// code). Values above 12 * 2^(e - 128) saturate to ±12 (ggml's choice of e keeps max |x| / scale in
// [8, 16)).
void quantize_mxfp4_row(const float* src, void* dst, int64_t n);

// A model "in mxfp4" is llama.cpp's file type MXFP4_MOE (general.file_type 38, how real gpt-oss GGUFs
// are stored): expert stacks in mxfp4, every other matrix in q8_0 (llama-quant.cpp's rule; 1-D
// tensors, routers and biases stay f32). The type of a matrix in such a file:
inline DType mxfp4_moe_type(bool expert_stack) { return expert_stack ? DType::MXFP4 : DType::Q8_0; }

}  // namespace polykv
