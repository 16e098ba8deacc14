// The x16 packed layout of q6_K weights (packed_weights.h): one 3392-byte record per group of 16
// rows and super-block of 256 values, the bytes of the 16 original blocks (quant/blocks.h BlockQ6_K)
// rearranged in 4-byte chunks so that 32-bit lane r of every 64-byte vector belongs to row r:
//   [0, 2048)     ql: vector v (0..31) at v*64 + 4r + i = ql[4v + i] of row r. With v = 16h + w
//                 (h = 0, 1; w = 0..15): low nibble = low 4 bits of value 128h + 4w + i, high nibble
//                 = value 128h + 64 + 4w + i.
//   [2048, 3072)  qh: vector v (0..15) at 2048 + v*64 + 4r + i = qh[4v + i] of row r. With v = 8h + c:
//                 bits 2k..2k+1 = high 2 bits of value 128h + 32k + 4c + i (k = 0..3).
//   [3072, 3328)  scales: vector v (0..3) at 3072 + v*64 + 4r + i = scales[4v + i] (int8) of row r.
//   [3328, 3360)  d of rows 0..15 (fp16);  [3360, 3392) zero padding (records stay 64-byte aligned).
// So sub-block s (32 values 32s .. 32s+31, s = 4h + k) chunk c (values 32s + 4c .. +3) of the 16 rows
// is: low 4 bits from ql vector 16h + 8(k & 1) + c (nibble k >> 1), high 2 bits from qh vector 8h + c
// (bits 2k, 2k+1): u = 0..63, value = d * scales[2s + c/4] * (u - 32).
//
// The group kernels sum, per (row, token) and super-block b, in integers (exact, |isum| < 2^28):
//   isum = Σ_{k<16} sc[k] * Σ_{i<16} u[16k + i] * q[16k + i]  -  32 * Σ_{k<16} sc[k] * bsum[k]
// then acc = fma(float(isum), d * da, acc) (d * da rounded to float first). Every kernel of this
// layout does exactly these operations, so they agree bit for bit, and each (row, token) runs in this
// one order whatever the number of tokens in the call (batch invariance, matmul_kernels.h).
#pragma once
#include <cstddef>

namespace polykv::cpu {

constexpr size_t kQ6KRecordBytes = 3392;
constexpr size_t kQ6KQhOffset = 2048;
constexpr size_t kQ6KScalesOffset = 3072;
constexpr size_t kQ6KDOffset = 3328;

}  // namespace polykv::cpu
