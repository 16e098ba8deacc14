// Facts about weight-type block layouts that tests of several kernels need (CPU matmul, CUDA matmul):
// which types are plain floats, and where each block keeps its fp16 scales (set to sane values when a
// test fills blocks with random bytes).
#pragma once
#include <cstddef>
#include <vector>

#include "core/dtype.h"
#include "quant/blocks.h"

namespace polykv::test {

inline bool is_float_type(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

// Byte offsets of the fp16 scale fields (d, and dmin / m where present) inside one block.
inline std::vector<size_t> half_fields(DType t) {
  switch (t) {
    case DType::Q4_0: case DType::Q5_0: case DType::Q8_0: return {0};
    case DType::Q4_1: case DType::Q5_1: case DType::Q4_K: case DType::Q5_K: return {0, 2};
    case DType::Q2_K: return {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)};
    case DType::Q3_K: return {offsetof(BlockQ3_K, d)};
    case DType::Q6_K: return {offsetof(BlockQ6_K, d)};
    case DType::TQ1_0: return {52};  // quant/ternary.h: the scale is the last field of all three layouts
    case DType::TQ2_0: return {64};
    case DType::PTQ1_0: return {26};
    default: return {};
  }
}

}  // namespace polykv::test
