// Attention scores against q8_0 K rows in integers: each query row is quantized once per call to
// q8_0-style blocks (32 values, one scale), and a score is a sum over blocks of an exact int32 dot
// product times the two blocks' scales, as llama.cpp's CPU path scores quantized K. The 32-key tile
// is scored straight from its stored blocks: no f32 copy of K is ever made.
//
// Prepared query row (q8_prepared_bytes(hd), a multiple of 64):
//   float   dq[nb]     block scales (the q8_0 reference's, through f16), nb = hd / 32
//   int32_t q128[nb]   128 * the sum of the block's values (the AVX-512 kernel's offset correction)
//   int8_t  qs[hd]     values, round(x / dq) in [-127, 127]
//
// Score of a row and a key (rows: q8_0 blocks, fp16 d then 32 int8), the one formula every kernel
// computes bit for bit:
//   s = 0; for b in 0 .. nb-1: s = fma(float(isum_b), dq[b] * float(d_b), s),
//   isum_b = sum_i qs[32b + i] * k_b[i]  (exact: |isum| < 2^24)
// It depends on the query row and the key alone, never on the other rows or keys of the call
// (attention.h, Invariance).
#pragma once
#include <cstddef>
#include <cstdint>

namespace polykv {

inline constexpr int kQ8ScoreMaxHd = 256;  // head sizes the integer score kernels take (a multiple of 32)

inline size_t q8_prepared_bytes(int hd) { return (size_t(hd) + 8 * size_t(hd / 32) + 63) / 64 * 64; }
// x: [hd] floats -> out: q8_prepared_bytes(hd) bytes. hd a multiple of 32.
void q8_prepare_query(const float* x, uint8_t* out, int hd);

// S[r * s_stride + j] = score of q_rows[r] (prepared) and k_rows[j] for r < n_rows, j < 32. Every
// k_rows[j] must point at a readable q8_0 row (masked keys: q8_zero_row(), which scores 0).
using Q8ScoreTileFn = void (*)(const uint8_t* const* k_rows, int hd, const uint8_t* const* q_rows, int n_rows,
                               float* S, size_t s_stride);
void score_tile_q8_scalar(const uint8_t* const* k_rows, int hd, const uint8_t* const* q_rows, int n_rows, float* S,
                          size_t s_stride);
Q8ScoreTileFn score_tile_q8_avx512();  // nullptr if this CPU lacks the AVX-512 set (incl. VNNI)

// A q8_0 row of kQ8ScoreMaxHd zeros (scale 0): what a masked key of a tile points at.
const uint8_t* q8_zero_row();

// Whether attention scores q8_0 K in integers where the ISA has the kernel (default on;
// POLYKV_ATTN_Q8=0 in the environment turns it off at start-up, for A/B runs).
bool attention_q8_enabled();
void set_attention_q8(bool on);

}  // namespace polykv
