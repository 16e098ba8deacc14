// Targets without x86 SIMD (ARM64): no x86 token-step kernels (ARM64 has gated_delta_kernels_neon.cpp).
#include "kv/gated_delta_kernels.h"

namespace polykv::gdn {

TokenStepFn token_step_avx2_kernel() { return nullptr; }
TokenStepFn token_step_avx512_kernel() { return nullptr; }

}  // namespace polykv::gdn
