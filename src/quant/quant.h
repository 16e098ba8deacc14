// Scalar reference quantize/dequantize for every weight type, ggml-identical block layouts
// (see quant/blocks.h). These are the ground truth the SIMD kernels are tested against.
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace polykv {

// dst[0..n) = values of the n-value row at src. n must be a multiple of the block size.
// Supports every type with DTypeInfo::weight_type (and q8_K); throws Error otherwise.
void dequantize_row_ref(DType type, const void* src, float* dst, int64_t n);

// Quantizes n floats into a row of `type` (round-to-nearest, ggml's reference algorithms).
// Supported: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_K..q6_K, q8_K and the ternary tq1_0, tq2_0, ptq1_0 and mxfp4 (can_quantize lists them);
// throws Error naming the type otherwise.
void quantize_row_ref(DType type, const float* src, void* dst, int64_t n);
bool can_quantize(DType type);

}  // namespace polykv
