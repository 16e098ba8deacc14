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

// Benchmark switch (bench/ternary_bench.cpp runs old and new interleaved in one process): true gives
// the kernels as they were before 2026-12-01f (no software prefetch, PTQ1_0 always on Q8_32). Starts
// from POLYKV_TQ_OLD=1 in the environment; set only between matmul() calls.
void set_ternary_old_kernels(bool old);
bool ternary_old_kernels();

// Bytes ahead of the block being read that the x86 kernels prefetch (ternary_kernels_x86.h; none when
// ternary_old_kernels()).
constexpr int kTernaryPrefetchBytes = 4096;

// PTQ1_0 reads Q8_K activations (a scale per 256, as TQ1_0) when its rows are a whole number of 256
// values, else Q8_32 (act_format() gives the latter; matmul() asks this).
inline bool ptq1_0_reads_q8_K(int64_t n_in) { return n_in % 256 == 0 && !ternary_old_kernels(); }

// The kernel for a ternary type at this ISA (the widest available at or below it), or nullptr if
// `type` is not ternary.
RowDotFn ternary_row_dot(Isa isa, DType type);

// Per-ISA tables (nullptr for non-ternary types); the SIMD ones only on CPUs that support them.
RowDotFn ternary_row_dot_scalar(DType type);
RowDotFn ternary_row_dot_avx2(DType type);
RowDotFn ternary_row_dot_avx512(DType type);

}  // namespace polykv::cpu
