// Internal to the CPU matmul: dot kernels for MXFP4 weights (quant/mxfp4.h) against Q8_32 activations
// (one scale per 32 values, like the MXFP4 blocks). Per weight block and token every kernel computes
// the exact integer Σ k_i q_i, k_i = kMxfp4Values[code] (the doubled E2M1 values, |k| <= 12), then
// one float multiply-add of that sum by 2^(e - 128) * d_act into the token's accumulator. SIMD kernels
// look the codes up as unsigned bytes u = k + 12 (0..24, one pshufb) and subtract 12 Σ q, exact, so
// they share the integers with the scalar kernel and differ only in float rounding. A block is
// unpacked once for all NT tokens of a call; each token's sum runs in one fixed order whatever NT is
// (batch invariance, matmul_kernels.h).
#pragma once
#include "backend/cpu/matmul_kernels.h"

namespace polykv::cpu {

// The kernel for `type` at this ISA (the widest available at or below it), or nullptr if `type` is
// not MXFP4.
RowDotFn mxfp4_row_dot(Isa isa, DType type);

// Per-ISA tables (nullptr for other types); the SIMD ones only on CPUs that support them. ARM64's
// NEON kernel is in the legacy table (legacy_kernels_neon.h, row_dot_neon).
RowDotFn mxfp4_row_dot_scalar(DType type);
RowDotFn mxfp4_row_dot_avx2(DType type);
RowDotFn mxfp4_row_dot_avx512(DType type);

}  // namespace polykv::cpu
