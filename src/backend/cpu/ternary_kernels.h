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
#if defined(__aarch64__)
RowDotFn ternary_row_dot_neon(DType type);        // SDOT kernels where the CPU has them (ternary_kernels_neon.cpp)
RowDotFn ternary_row_dot_neon_plain(DType type);  // the ARMv8-A kernels on any ARM64 CPU (tests)
#endif
// TQ1_0 / PTQ1_0 on AVX-512 VBMI + GFNI (ternary_kernels_avx512vbmi.cpp), or nullptr: another type, a
// CPU without VBMI or GFNI, the switch below off, or (by default) TQ1_0 on a CPU other than AMD Zen 5+ (on Sapphire
// Rapids its 1-token kernel measured 0.87x of the VNNI one; PTQ1_0's VNNI kernel is ~2x slower than
// TQ1_0's, so PTQ1_0 takes VBMI wherever it exists). They read ActRow::tperm; where it is null (PTQ1_0
// rows not of whole 256s) they call the AVX-512 kernel instead.
RowDotFn ternary_row_dot_avx512vbmi(DType type);

// Switch for A/B runs (bench/ternary_bench.cpp) and tests: 0 = never the VBMI kernels (those of
// 2026-12-01f), 1 = whenever the CPU has VBMI (both types), -1 = the default above. Starts from
// POLYKV_TQ_VBMI ("0" or "1"; else -1); set only between matmul() calls.
void set_ternary_vbmi_kernels(int mode);
int ternary_vbmi_kernels();

// Bytes of ActRow::tperm for n_in values of a TQ1_0 / PTQ1_0 matrix: 328 per 256 values (five 64-byte
// vectors per Q8_K block, then an int32 pair per block; ternary_permute_act). 0 for other types or n_in
// not a multiple of 256.
size_t ternary_perm_bytes(DType type, int64_t n_in);
// Index within a base-3 block (n_qs code bytes in stages of 32/16/8, then n_qh 4-digit qh bytes;
// quant/ternary.cpp's value order) of the value that digit n of code byte m encodes, or -1 (a qh
// byte's digit 4, or m past the code bytes).
constexpr int base3_value_index(int n_qs, int n_qh, int m, int n) {
  int j = 0, v0 = 0;
  for (const int c : {32, 16, 8})
    for (; j + c <= n_qs; j += c, v0 += 5 * c)
      if (m < j + c) return v0 + n * c + (m - j);
  if (m < n_qs + n_qh && n < 4) return v0 + n * n_qh + (m - n_qs);
  return -1;
}
// True when ternary_row_dot(isa, type) reads ActRow::tperm for rows of n_in values (matmul fills it).
bool ternary_wants_perm(Isa isa, DType type, int64_t n_in);
// Q8_K activations (qs, bsums; n_in a multiple of 256) in the byte order of the VBMI kernels: per
// Q8_K block b five 64-byte vectors at 320 b: vector n holds, at byte m, the activation whose weight is
// digit n of weight code byte m (TQ1_0: the 52 code bytes qs[48], qh[4] of one block; PTQ1_0: bytes
// 0..31 the 26 code bytes of the first of two blocks, 32..63 those of the second), 0 where no value
// falls; then, at 320 * n_blocks + 8 b, the int32 pair -Σq (TQ1_0: of the block, and 0; PTQ1_0: of
// each 128-value half). Scalar reference.
void ternary_permute_act(DType type, const int8_t* qs, const int16_t* bsums, int64_t n_in, int8_t* out);
// The same by vpermi2b (ternary_kernels_avx512vbmi.cpp; only where ternary_row_dot_avx512vbmi is not null).
void ternary_permute_act_vbmi(DType type, const int8_t* qs, const int16_t* bsums, int64_t n_in, int8_t* out);

}  // namespace polykv::cpu
