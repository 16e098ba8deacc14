// Trellis-coded turbo3 ("turbo3t"): turbo3's rotation, groups and norm correction (quant/turbo.h),
// with the 3 bits of each rotated coordinate chosen jointly along the group by an 8-state trellis
// (trellis-coded quantization, Marcellin & Fischer 1990) instead of one coordinate at a time.
// Same size as turbo3 (3.125 bits per value at group 128); on unit Gaussian coordinates its mean
// squared error is ~0.0235 against turbo3's 0.034 (tools/tcq_codebook.py, tests/turbo_trellis_test.cpp).
//
// Per group of n rotated coordinates u_i = (H·S·x_g / r)_i (turbo.h):
//   Each coordinate has a trellis bit t_i and a 2-bit index j_i. The window of coordinate i is
//     w_i = t_{i-3} | t_{i-2} << 1 | t_{i-1} << 2 | t_i << 3      (t_k = 0 for k < 0),
//   its subset s(w_i) = 2 * parity(w_i & 15) + parity(w_i & 4), and its level is
//     c_i = levels[s(w_i) + 4 * j_i]   (16 ascending levels, kTrellisCodebook / sqrt(n)),
//   so subset s holds levels s, s+4, s+8, s+12. The encoder (Viterbi over the 8 states
//   (t_{i-3}, t_{i-2}, t_{i-1}), starting in state 0) picks the bits t and indices j minimizing
//   sum_i (u_i - c_i)^2. Stored norm r' = r / ||c|| as in turbo3 (the decoded vector keeps r).
//
// Byte layout of one group record (n = 128: 2 + 16 + 32 = 50 bytes, turbo3's size):
//   [0, 2)              r' as IEEE fp16, little-endian (0 for an all-zero group: decodes to zeros)
//   [2, 2 + n/8)        t_0..t_{n-1}, LSB-first bit stream
//   [2 + n/8, 2 + 3n/8) j_0..j_{n-1}, 2 bits each, LSB-first (index i at bits [2i, 2i+2))
// Groups of one head follow each other as in turbo.h. This is a stored format.
#pragma once
#include <cstddef>
#include <cstdint>

namespace polykv::turbo::trellis {

// The 16 levels for N(0, 1) coordinates, ascending and symmetric (tools/tcq_codebook.py).
extern const double kTrellisCodebook[16];

// Subset (0..3) of a 4-bit window w (see above).
constexpr int subset_of_window(int w) {
  const int p1 = __builtin_parity(unsigned(w) & 15u), p0 = __builtin_parity(unsigned(w) & 4u);
  return 2 * p1 + p0;
}

// Bytes of one head: n_groups * (2 + 3 * group / 8). Throws Error for a bad head_dim (turbo.h rules).
size_t head_bytes(int head_dim);

// x[0..head_dim) (original basis) -> dst[0..head_bytes). Reference implementation (Viterbi).
void quantize_head(const float* x, uint8_t* dst, int head_dim);
// src -> y[0..head_dim) in the rotated basis: y_i = r'_g * c_i.
void decode_rotated(const uint8_t* src, float* y, int head_dim);
// The same as decode_rotated, with AVX-512 or AVX2 when the CPU has it (bit-identical results).
void decode_rotated_fast(const uint8_t* src, float* y, int head_dim);
using DecodeFn = void (*)(const uint8_t* src, float* y, int head_dim);
DecodeFn decode_rotated_avx2_kernel();    // nullptr without AVX2
DecodeFn decode_rotated_avx512_kernel();  // nullptr without AVX-512
// src -> x[0..head_dim) in the original basis (decode_rotated, then S·H per group).
void dequantize_head(const uint8_t* src, float* x, int head_dim);

// The 16 levels scaled for a group of n in {32, 64, 128} (kTrellisCodebook / sqrt(n)), float.
const float* levels(int group);

}  // namespace polykv::turbo::trellis
