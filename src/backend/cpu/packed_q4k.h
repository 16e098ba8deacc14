// The x16 packed layouts of q4_K and q5_K weights (packed_weights.h): one 2304-byte record per group of 16
// rows and super-block of 256 values, exactly the bytes of the 16 original blocks, rearranged so
// that 32-bit lane r of every 64-byte vector belongs to row r:
//   [0, 2048)     quants: pair p (0..3) and chunk c (0..7) at p*512 + c*64 + 4r + i (i = 0..3) =
//                 byte qs[32p + 4c + i] of row r's block: low nibble = value 64p + 4c + i (sub-block
//                 2p), high nibble = value 64p + 32 + 4c + i (sub-block 2p + 1), unsigned 0..15.
//   [2048, 2240)  scales: vector v (0..2) at 2048 + v*64 + 4r + i = scales[4v + i] of row r (the
//                 12 bytes of 6-bit scales and mins, unchanged).
//   [2240, 2272)  d of rows 0..15 (fp16);  [2272, 2304) dmin of rows 0..15 (fp16).
// Records are 64-byte aligned (2304 = 36 * 64).
//
// The group kernel sums, per (row, token) and super-block b, in integers (exact):
//   isum = Σ_j sc[j] * Σ_{i<32} u[32j + i] * q[32j + i],   msum = Σ_j m[j] * (bsum[2j] + bsum[2j+1])
// then, in this order, acc = fma(float(isum), d * da, acc); acc = fma(-float(msum), dmin * da, acc)
// (d * da and dmin * da rounded to float first). The AVX-512 kernel and the scalar reference do
// exactly these operations, so they agree bit for bit; each (row, token) runs in this one order
// whatever the number of tokens in the call (batch invariance, matmul_kernels.h).
#pragma once
#include <cstddef>
#include <cstdint>

namespace polykv::cpu {

constexpr size_t kQ4KRecordBytes = 2304;
constexpr size_t kQ4KScalesOffset = 2048;
constexpr size_t kQ4KDOffset = 2240;
constexpr size_t kQ4KDminOffset = 2272;

// q5_K (BlockQ5_K: q4_K plus a fifth bit per value) uses the same record with its fifth bits inserted
// after the quants, 2816 bytes (44 * 64):
//   [0, 2048)     low 4 bits, exactly as q4_K's quants above.
//   [2048, 2560)  qh: vector c (0..7) at 2048 + c*64 + 4r + i = qh[4c + i] of row r: bit j = fifth bit
//                 of value 32j + 4c + i (sub-block j), so u = nibble | bit << 4 = 0..31.
//   [2560, 2752)  scales as q4_K's;  [2752, 2784) d;  [2784, 2816) dmin.
// The group kernels compute the same sums and float steps as q4_K's (with u up to 31).
constexpr size_t kQ5KRecordBytes = 2816;
constexpr size_t kQ5KQhOffset = 2048;
constexpr size_t kQ5KScalesOffset = 2560;
constexpr size_t kQ5KDOffset = 2752;
constexpr size_t kQ5KDminOffset = 2784;

// Offsets of a q4_K or q5_K record.
template <bool kFive>
struct K45Layout {
  static constexpr size_t kRecord = kFive ? kQ5KRecordBytes : kQ4KRecordBytes;
  static constexpr size_t kScales = kFive ? kQ5KScalesOffset : kQ4KScalesOffset;
  static constexpr size_t kD = kFive ? kQ5KDOffset : kQ4KDOffset;
  static constexpr size_t kDmin = kFive ? kQ5KDminOffset : kQ4KDminOffset;
};

}  // namespace polykv::cpu
