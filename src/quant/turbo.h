// TurboQuant KV coding (DESIGN.md §4): turbo2 / turbo3 / turbo4 = bits 2, 3, 4 per value.
//
// One (token, KV head) vector of head_dim floats is coded in groups along head_dim: groups of 128
// when head_dim % 128 == 0 (256 -> 2 groups, 512 -> 4), else one group of head_dim, which must then
// be 64 or 32. Other head_dims throw polykv::Error.
//
// Per group g of n values (x_g, original basis; post-RoPE for K):
//   r = ||x_g||, u = x_g / r, y = H·S·u
//     S: diagonal of ±1 signs, fixed per group size n (see "Signs" below)
//     H: normalized n-point Walsh–Hadamard transform (H = H^T, H·H = I), applied in place, O(n log n)
//   idx_i = nearest level of levels(bits, n) to y_i  (the Lloyd–Max codebook of N(0,1), / sqrt(n))
//   c_i = levels(bits, n)[idx_i];  stored norm r' = r / ||c||  (fp16)
// Decoding (rotated basis): v_i = r' * c_i, so ||v|| = r exactly up to fp16 rounding of r'
// ("norm correction": the decoded vector keeps the original norm; it is NOT the least-squares scale
// r·<u,c>/||c||², which would shrink it). Original basis: x̂_g = S·H·v. All-zero groups store r' = 0
// (and indices 0), decoding to zeros.
//
// Byte layout of one head: n_groups consecutive group records, group g at byte g * group_bytes:
//   [0, 2)             r' as IEEE fp16, little-endian
//   [2, 2 + n*bits/8)  the n indices as an LSB-first bit stream: index i occupies bits
//                      [bits*i, bits*i + bits) of the little-endian byte string. So for 2 bits
//                      index i is bits 2*(i%4) of byte i/4; for 4 bits the low nibble of byte i/2 is
//                      the even index; for 3 bits each 3 bytes b0,b1,b2 hold 8 indices as the 24-bit
//                      word b0 | b1<<8 | b2<<16, index j of the 8 at bits [3j, 3j+3).
//   group_bytes = 2 + n*bits/8: @128 turbo2 = 34, turbo3 = 50 (3.125 bits/value), turbo4 = 66.
//   Records are 2-byte aligned relative to the head start (every group_bytes is even); readers
//   use memcpy and need no alignment.
//
// Signs: for group size n, s_i = -1 iff bit (i % 64) of w_{i/64} is set, where w_0, w_1, ... are
// successive outputs of splitmix64 (Steele, Lea & Flood 2014: state += 0x9E3779B97F4A7C15, then
// z = state; z = (z ^ z>>30) * 0xBF58476D1CE4E5B9; z = (z ^ z>>27) * 0x94D049BB133111EB; z ^ z>>31)
// started from state = kSignSeed ^ n, kSignSeed = 0x706F6C796B765451 ("polykvTQ" as ASCII bytes).
// This is part of the stored format: changing it invalidates every turbo KV cache written before.
//
// Attention works in the rotated basis: q·k = (H·S·q)·(H·S·k) because H·S is orthogonal, so the query
// is rotated once per step (rotate) and dot_rotated is called per cached key; values are accumulated
// with axpy_rotated and the sum is rotated back once (unrotate).
#pragma once
#include <cstddef>
#include <cstdint>

namespace polykv::turbo {

constexpr uint64_t kSignSeed = 0x706F6C796B765451ull;

// 128 when head_dim % 128 == 0, else head_dim (32 or 64). Throws Error for any other head_dim.
int group_size(int head_dim);
// n_groups * (2 + group * bits / 8). Throws Error for bits outside {2, 3, 4} or a bad head_dim.
size_t head_bytes(int bits, int head_dim);

// x[0..head_dim) (original basis) -> dst[0..head_bytes(bits, head_dim)). Reference implementation.
void quantize_head(int bits, const float* x, uint8_t* dst, int head_dim);
// src -> x[0..head_dim) in the original basis (x̂ = S·H·v per group). Reference implementation.
void dequantize_head(int bits, const uint8_t* src, float* x, int head_dim);

// Per group, in place: x <- H·S·x.
void rotate(float* x, int head_dim);
// Per group, in place: y <- S·H·y (the inverse of rotate).
void unrotate(float* y, int head_dim);

// Rotated basis: coordinate i of a stored vector is v_i = r'_g * levels(bits, group)[idx_i].
// sum_i q_rot[i] * v_i over head_dim values (q_rot = rotate(q)). Uses AVX2 when the CPU has it.
float dot_rotated(int bits, const uint8_t* src, const float* q_rot, int head_dim);
// acc_rot[i] += a * v_i over head_dim values. Uses AVX2 when the CPU has it.
void axpy_rotated(int bits, float a, const uint8_t* src, float* acc_rot, int head_dim);
// y_rot[i] = v_i over head_dim values (bit-identical to axpy_rotated with a = 1 into zeros).
void decode_rotated(int bits, const uint8_t* src, float* y_rot, int head_dim);

// 2^bits levels, ascending: gaussian_codebook(bits) / sqrt(group), for group in {32, 64, 128}, rounded to
// the nearest fp16 value (since 2026-12-02; a relative change <= 2^-11, ~1e-4 of the quantization error): every
// level is exact in f16, so tensor-core kernels multiply stored values with one f16 product instead of a hi/lo
// pair (backend/cuda/attention_cuda_decode_tc.cuh). Encoders and decoders share this one table.
const float* levels(int bits, int group);
// 2^bits Lloyd–Max (MSE-optimal) levels for N(0, 1), ascending, symmetric.
const float* gaussian_codebook(int bits);
// The same levels in double precision, as produced by tools/lloyd_max.py.
const double* gaussian_codebook_f64(int bits);

}  // namespace polykv::turbo
