// Scalar reference quantizers for the k-quant weight types, bit-identical to ggml's
// quantize_row_*_ref built without FMA contraction (see kquant_quantize_ref.cpp). Used by
// quantize_row_ref (quant/quant.h); callers normally go through that.
//
// Every function: n must be a multiple of kQK_K; writes n / kQK_K blocks, each a function of its own
// 256 input values only (so rows may be split at block boundaries). Inputs are finite weights; the
// bit-identity is tested (tests/kquant_quantize_test.cpp) on rows with |x| from 0 to a few thousand,
// fp16-subnormal scales included.
#pragma once
#include <cstdint>

#include "quant/blocks.h"

namespace polykv {

void quantize_row_q2_K_ref(const float* x, BlockQ2_K* y, int64_t n);
void quantize_row_q3_K_ref(const float* x, BlockQ3_K* y, int64_t n);
void quantize_row_q4_K_ref(const float* x, BlockQ4_K* y, int64_t n);
void quantize_row_q5_K_ref(const float* x, BlockQ5_K* y, int64_t n);
void quantize_row_q6_K_ref(const float* x, BlockQ6_K* y, int64_t n);

}  // namespace polykv
