// Scalar reference quantizers for the k-quant weight types, bit-identical to ggml's
// quantize_row_*_ref built without FMA contraction (see kquant_quantize_ref.cpp). Used by
// quantize_row_ref (quant/quant.h); callers normally go through that.
#pragma once
#include <cstdint>

#include "quant/blocks.h"

namespace polykv {

// n must be a multiple of kQK_K; writes n / kQK_K blocks.
void quantize_row_q6_K_ref(const float* x, BlockQ6_K* y, int64_t n);

}  // namespace polykv
