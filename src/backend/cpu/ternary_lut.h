// Ternary weights (TQ1_0, TQ2_0, PTQ1_0 in rows of whole 256s) by table lookup: the "LUT" matmul path.
//
// Why: a ternary code byte holds 5 (base 3) or 4 (2-bit) values, and unpacking it into digits costs more
// instructions than the multiply-adds they feed; the row kernels (ternary_kernels.h) reached 0.53-0.63 of the
// read floor for TQ1_0 / PTQ1_0 on a 2-core Zen 5 VM, bound by those instructions (docs/TERNARY.md). Here each
// code byte position m of a 256-value block gets, per token, a 256-entry table
//     T_m[q] = Σ_n t_n(q) * x[v(m, n)]          (int16; t_n(q) the value digit n of code q stands for)
// of the exact integer dot of "code q at position m" with the token's Q8_K activations x. Rows are
// interleaved 64 to a vector, one byte each, so that a byte lookup (vpermi2b) of 64 codes at position m
// gives T_m for 64 rows at once: 4 lookups (low and high bytes of the 16-bit entries, 128 entries per
// lookup) and 2 unpacks replace the digit extraction and the products. The integer sums are exact, so the
// result depends only on the weights and activations.
//
// Layout of a packed matrix (PackedMatrix with rows_per_group = kLutRows): rows [0, 64 * n_groups), the
// n_out % 64 tail rows stay in the original matrix (row kernels). Chunks of 64 rows go in tiles of kLutTile
// (the last tile may be shorter); one record per (256-value block b, tile), b-major, so that the records of
// block b are chunks 0 .. n_groups - 1 in order: record (b, tile j) starts at qs + (b * n_groups + kLutTile * j)
// * record_bytes, holds tc = min(kLutTile, n_groups - kLutTile * j) chunks and is tc * record_bytes long:
//   codes  [n_code][tc][64]   byte p of (m, chunk) = code byte m of row lut_row_of_lane(p) of that chunk's
//                             block b (TQ1_0: qs[48], qh[4]; PTQ1_0: the 26 code bytes of its block 2b, then
//                             of 2b + 1; TQ2_0: qs[64]), unchanged
//   scales [n_scale][tc][64]  fp16 d of row r of the chunk (natural order; PTQ1_0: block 2b's, then 2b + 1's)
// = exactly the original bytes of those rows (TQ1_0 3456, PTQ1_0 3584, TQ2_0 4224 per chunk and block).
// Why tiles: the kernel keeps one position's table in registers while it walks the tile's chunks (a table
// reloaded per chunk, 8 loads per 64 code bytes, cost half the DRAM rate on the Zen 5 VM), and a thread's
// chunks stay one contiguous stream per block.
//
// Per (row, token) the sum is defined as (the scalar reference ternary_lut_ref computes exactly this):
//   acc = 0; for each block b in order:
//     TQ1_0, TQ2_0:  acc = fma(float(S_b), d_b * dx_b, acc)           S_b = Σ_m T_m[code_m]  (int32, exact)
//     PTQ1_0:        acc = fma(float(S_b0), d_b0 * dx_b, acc); acc = fma(float(S_b1), d_b1 * dx_b, acc)
// whatever the number of tokens in the call: batch invariant. (The 16-bit partial sums cannot overflow:
// |T_m| <= 5 * 127 over at most 52 positions (TQ1_0, PTQ1_0 halves of 26), |T_m| <= 4 * 2 * 127 over 32
// (TQ2_0 halves); 32512 either way.)
#pragma once
#include <cstdint>
#include <memory>

#include "backend/cpu/packed_weights.h"
#include "core/dtype.h"

namespace polykv {
class ThreadPool;
}

namespace polykv::cpu {

struct ActRow;

constexpr int kLutRows = 64;  // rows per chunk (one byte lane each)
constexpr int kLutTile = 8;   // chunks per tile

// The row whose code a byte lane p of a 64-byte code vector holds: lanes 16L + i, i < 8, hold rows 8L + i,
// lanes 16L + 8 + i rows 32 + 8L + i, so that the byte unpacks of the low and high table planes give the
// 16-bit sums of rows 0..31, then 32..63, in order.
constexpr int lut_row_of_lane(int p) { return (p % 16 < 8 ? 0 : 32) + 8 * (p / 16) + p % 8; }

// Per-type shape of a 256-value block in the LUT layout.
struct LutShape {
  int n_code = 0;     // code bytes per 256 values: 52 (TQ1_0, PTQ1_0) or 64 (TQ2_0)
  int seg = 0;        // code bytes per 16-bit partial sum: 52, 26, 32
  int n_scale = 0;    // fp16 scales per row and 256 values: 1, 2 (PTQ1_0), 1
  int record_bytes() const { return kLutRows * (n_code + 2 * n_scale); }
};
LutShape lut_shape(DType type);

// Addresses in the layout above: code byte m of chunk c, block b (64 bytes, one per lane); scale s of chunk
// c, block b (64 fp16, rows in order).
inline const uint8_t* lut_codes_at(const uint8_t* qs, const LutShape& sh, int64_t n_groups, int64_t b, int64_t c, int m) {
  const int64_t j0 = c / kLutTile * kLutTile, tc = n_groups - j0 < kLutTile ? n_groups - j0 : kLutTile;
  return qs + size_t(b * n_groups + j0) * size_t(sh.record_bytes()) + size_t(m * tc + (c - j0)) * 64;
}
inline const uint8_t* lut_scales_at(const uint8_t* qs, const LutShape& sh, int64_t n_groups, int64_t b, int64_t c, int s) {
  const int64_t j0 = c / kLutTile * kLutTile, tc = n_groups - j0 < kLutTile ? n_groups - j0 : kLutTile;
  return qs + size_t(b * n_groups + j0) * size_t(sh.record_bytes()) + size_t(sh.n_code * tc) * 64 +
         size_t(s * tc + (c - j0)) * 128;
}

// Byte (0..255) of a Q8_K activation block that digit n (0..4) of code byte m weighs, or -1.
int lut_value_index(DType type, int m, int n);
// The value (-1, 0, 1; TQ2_0 code 3: 2) that digit n of code byte q stands for.
int lut_digit_value(DType type, uint8_t q, int n);

// True if the AVX-512 LUT kernel runs here for rows of n_in values: AVX-512 with VBMI as the active ISA, n_in a
// multiple of 256. (pack_for_matmul also asks ternary_lut_enabled(); a matrix packed already keeps its kernel.)
bool ternary_lut_available(DType type, int64_t n_in);

// Fewest rows for which pack_for_matmul (matmul.h) packs a ternary matrix for the LUT path: each thread builds
// its tables once per block (~0.25 us a token on the Zen 5 VM, ~4 chunks' lookups), so below ~8 chunks a
// thread the row kernels are as fast (bench/ternary_bench.cpp hot_core at 512 rows, 2026-12-05). A property
// of the matrix only, so a row's kernel never depends on the batch or the threads.
constexpr int64_t kLutMinRows = 512;

// Switch for A/B runs and tests: false = never pack ternary matrices for the LUT path (the row kernels of
// ternary_kernels.h, as before 2026-12-05). Starts from POLYKV_TQ_LUT ("0" = off). Affects packing only:
// set it before the matrices are packed (model load).
void set_ternary_lut(bool on);
bool ternary_lut_enabled();

// Repacks rows [0, 64 * (n_out / 64)) of a ternary matrix into the LUT layout; null if there is not one
// whole chunk, n_in is not a multiple of 256, or the type is not ternary.
std::unique_ptr<PackedMatrix> pack_ternary_lut(DType type, const void* data, int64_t n_in, int64_t n_out,
                                               size_t row_stride);

// Chunks [c0, c1) of p against tokens act[0 .. n_tok) (Q8_K; any n_tok >= 1):
//   y[t * ldy + 64 c + r] = row 64c + r · token t   (the sum defined above).
// AVX-512 VBMI (ternary_lut_avx512vbmi.cpp); only where ternary_lut_available().
void ternary_lut_matmul_avx512vbmi(const PackedMatrix& p, int64_t c0, int64_t c1, const ActRow* act, int n_tok,
                                   float* y, int64_t ldy);

// The same over the packed layout in plain C++ (any CPU; bit-identical to the AVX-512 one): matmul() takes it
// where a LUT-packed matrix meets another active ISA (a test's force_isa after packing).
void ternary_lut_matmul_scalar(const PackedMatrix& p, int64_t c0, int64_t c1, const ActRow* act, int n_tok,
                               float* y, int64_t ldy);

// Scalar reference of that sum from the original matrix (rows [0, n_out), row_stride apart): no packing,
// no tables, the same float operations in the same order (tests compare bit for bit).
void ternary_lut_ref(DType type, const void* data, int64_t n_in, int64_t n_out, size_t row_stride,
                     const ActRow* act, int n_tok, float* y, int64_t ldy);

}  // namespace polykv::cpu
