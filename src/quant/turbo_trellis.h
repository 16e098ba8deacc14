// Trellis-coded turbo ("turbo2t" / "turbo3t" / "turbo4t"): turbo<b>'s rotation, groups, size and
// norm correction (quant/turbo.h), with the b bits of each rotated coordinate chosen jointly along
// the group by an 8-state trellis (trellis-coded quantization, Marcellin & Fischer 1990) instead of
// one coordinate at a time. On unit Gaussian coordinates the mean squared error per coordinate is
// 0.0859 / 0.0235 / 0.0062 against turbo2/3/4's 0.116 / 0.034 / 0.0094 (tools/tcq_codebook.py,
// tests/turbo_trellis_test.cpp), at the same number of bytes.
//
// Per group of n rotated coordinates u_i = (H·S·x_g / r)_i (turbo.h), for b bits:
//   Each coordinate has a trellis bit t_i and a (b-1)-bit index j_i. The window of coordinate i is
//     w_i = t_{i-3} | t_{i-2} << 1 | t_{i-1} << 2 | t_i << 3      (t_k = 0 for k < 0),
//   its subset s(w_i) = 2 * parity(w_i & 15) + parity(w_i & 4), and its level is
//     c_i = levels[s(w_i) + 4 * j_i]   (2^(b+1) ascending levels, codebook(b) / sqrt(n)),
//   so subset s holds levels s, s+4, s+8, ... The encoder (Viterbi over the 8 states
//   (t_{i-3}, t_{i-2}, t_{i-1}), starting in state 0) picks the bits t and indices j minimizing
//   sum_i (u_i - c_i)^2. Stored norm r' = r / ||c|| as in turbo (the decoded vector keeps r).
//
// Byte layout of one group record (2 + b*n/8 bytes, turbo<b>'s size; n = 128, b = 3: 50 bytes):
//   [0, 2)                     r' as IEEE fp16, little-endian (0 for an all-zero group: zeros)
//   [2, 2 + n/8)               t_0..t_{n-1}, LSB-first bit stream
//   [2 + n/8, 2 + b*n/8)       j_0..j_{n-1}, (b-1) bits each, LSB-first bit stream (index i at bits
//                              [(b-1)i, (b-1)(i+1)), as turbo.h's index streams)
// Groups of one head follow each other as in turbo.h. This is a stored format.
#pragma once
#include <cstddef>
#include <cstdint>

namespace polykv::turbo::trellis {

// 2^(bits+1) levels for N(0, 1) coordinates, ascending and symmetric (tools/tcq_codebook.py);
// bits in {2, 3, 4}. Throws Error otherwise.
const double* codebook(int bits);

// Subset (0..3) of a 4-bit window w (see above).
constexpr int subset_of_window(int w) {
  const int p1 = __builtin_parity(unsigned(w) & 15u), p0 = __builtin_parity(unsigned(w) & 4u);
  return 2 * p1 + p0;
}

// subset_of_window for all 16 windows, 2 bits each: subset of w = (kSubsetWord >> 2w) & 3 (one
// variable shift per SIMD lane).
constexpr uint32_t kSubsetWord = [] {
  uint32_t word = 0;
  for (int w = 0; w < 16; ++w) word |= uint32_t(subset_of_window(w)) << (2 * w);
  return word;
}();

// Bytes of one head: n_groups * (2 + bits * group / 8), turbo::head_bytes(bits, head_dim). Throws
// Error for bits outside {2, 3, 4} or a bad head_dim (turbo.h rules).
size_t head_bytes(int bits, int head_dim);

// x[0..head_dim) (original basis) -> dst[0..head_bytes). Reference implementation (Viterbi).
void quantize_head(int bits, const float* x, uint8_t* dst, int head_dim);
// src -> y[0..head_dim) in the rotated basis: y_i = r'_g * c_i. Reference implementation.
void decode_rotated(int bits, const uint8_t* src, float* y, int head_dim);
// src -> x[0..head_dim) in the original basis (decode_rotated, then S·H per group).
void dequantize_head(int bits, const uint8_t* src, float* x, int head_dim);

// The same bytes as quantize_head, with the AVX2 encoder (turbo_trellis_encode_avx2.cpp: the 8 Viterbi states
// in one vector) when the active ISA (core/isa.h) has AVX2; the KV cache's trellis types store through it.
void quantize_head_fast(int bits, const float* x, uint8_t* dst, int head_dim);
using QuantizeFn = void (*)(int bits, const float* x, uint8_t* dst, int head_dim);
QuantizeFn quantize_head_avx2_kernel();  // nullptr without AVX2 (and on ARM64)

// The same as decode_rotated, with AVX-512 or AVX2 when the CPU has it, NEON on ARM64 (bit-identical results).
void decode_rotated_fast(int bits, const uint8_t* src, float* y, int head_dim);
using DecodeFn = void (*)(int bits, const uint8_t* src, float* y, int head_dim);
DecodeFn decode_rotated_avx2_kernel();    // nullptr without AVX2
DecodeFn decode_rotated_avx512_kernel();  // nullptr without AVX-512
#if defined(__aarch64__)
DecodeFn decode_rotated_neon_kernel();  // turbo_trellis_neon.cpp (ASIMD: every AArch64 CPU)
#endif

// The 2^(bits+1) levels scaled for a group of n in {32, 64, 128} (codebook / sqrt(n)), rounded to the nearest
// fp16 value like turbo::levels (every level exact in f16), as floats.
const float* levels(int bits, int group);

}  // namespace polykv::turbo::trellis
