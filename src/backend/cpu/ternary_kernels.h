// Internal to the CPU matmul: dot kernels for the ternary weight types (quant/ternary.h).
// Activations: TQ1_0 and TQ2_0 read Q8_K (one scale per 256 values, like their blocks), PTQ1_0 reads
// Q8_32 (its 128-value blocks need not pair up into 256). Every kernel computes, per weight block and
// token, the exact integer Σ t_i * q_i (as Σ c_i q_i - Σ q_i with codes c = t + 1 in 0..3, the
// activation sums giving the second term), then one float FMA per block (PTQ1_0: per 32 values) into
// the token's accumulator; so a (row, token) dot is summed in one order whatever the number of tokens
// in the call (batch invariance, matmul_kernels.h). A block is unpacked once for all NT tokens.
#pragma once
#include "backend/cpu/matmul_kernels.h"

namespace polykv::cpu {

// The kernel for a ternary type at this ISA (the widest available at or below it), or nullptr if
// `type` is not ternary.
RowDotFn ternary_row_dot(Isa isa, DType type);

// Per-ISA tables (nullptr for non-ternary types); the SIMD ones only on CPUs that support them.
RowDotFn ternary_row_dot_scalar(DType type);
RowDotFn ternary_row_dot_avx2(DType type);
RowDotFn ternary_row_dot_avx512(DType type);
// TQ1_0 by VBMI byte lookups (ternary_kernels_avx512vbmi.cpp), or nullptr: another type, a CPU without
// AVX512_VBMI, or POLYKV_TERNARY_VBMI=0. It reads ActRow::tq1p, which matmul fills when
// ternary_wants_tq1p() says so.
RowDotFn ternary_row_dot_avx512vbmi(DType type);

// True when the kernel ternary_row_dot(isa, type) reads ActRow::tq1p.
bool ternary_wants_tq1p(Isa isa, DType type);

// Bytes of ActRow::tq1p for n_in values (a multiple of 256).
inline size_t tq1p_bytes(int64_t n_in) { return size_t(n_in / 256) * 384; }

// Q8_K activations of n_in values (qs, bsums) in the byte order of the VBMI TQ1_0 kernel, 384 bytes per
// 256 values: out[64 n + m] (n < 5, m < 64) = the activation of value 32n + m (m < 32),
// 160 + 16n + (m - 32) (m < 48), 240 + 4n + (m - 48) (m < 52, n < 4), else 0; then the int32 -Σ qs of
// the block at byte 320 and zeros to 383.
void tq1_0_vbmi_act(const int8_t* qs, const int16_t* bsums, int64_t n_in, int8_t* out);

}  // namespace polykv::cpu
