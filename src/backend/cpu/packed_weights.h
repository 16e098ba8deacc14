// Weights repacked at model load into a 16-row interleaved layout ("x16") for the integer kernels.
//
// Why: the row-at-a-time kernels (legacy_kernels_x86.h) spend most of their instructions per 32-value
// block on unpacking, scale conversion and a horizontal sum per row. Interleaving 16 rows so that
// 32-bit lane r of a 512-bit vector holds 4 consecutive quants of row r lets one vpdpbusd with a
// broadcast activation dword do 64 multiply-adds for 16 rows at once, and the 16 row results come out
// in the 16 lanes: no horizontal sums at all.
//
// Layout of group g (rows 16g .. 16g+15), block b (values 32b .. 32b+31), nb = n_in / 32 blocks:
//   q4_0  qs + (g*nb + b) * 256 + c*64 + 4r + i   (c = 0..3, i = 0..3) = byte 4c+i of row 16g+r's
//         block b, unchanged: low nibble = quant of value 4c+i, high nibble = value 16+4c+i (0..15).
//         So vector c, masked to low nibbles, holds "chunk" c (values 4c..4c+3) of all 16 rows; its
//         high nibbles hold chunk 4+c.
//   q8_0  qs + (g*nb + b) * 512 + c*64 + 4r + i   (c = 0..7) = (byte 4c+i of row 16g+r's block b)
//         XOR 0x80, i.e. the quant q + 128 as an unsigned byte (0..255), chunk c of 16 rows.
//   mxfp4 as q4_0 (the nibbles unchanged: codes 0..15, low nibble = value 4c+i, high = 16+4c+i), and
//         d + (g*nb + b) * 16 + r = the block's E8M0 exponent e (scale 2^(e - 128), quant/mxfp4.h).
//   q4_0, q8_0  d + (g*nb + b) * 16 + r = fp16 scale of row 16g+r, block b.
//   q4_K  (blocks of 256 values; packed_q4k.cpp) one self-contained 2304-byte record per group and
//         super-block at qs + (g*nb + b) * 2304: quants, 6-bit scales / mins and d / dmin of the 16
//         rows (the layout is described in packed_q4k.h); `d` is unused.
//   q5_K  likewise one 2816-byte record (q4_K's plus the fifth bits, packed_q4k.h); `d` is unused.
//   q6_K  likewise one 3392-byte record per group and super-block (packed_q6k.h); `d` is unused.
//         Only AVX2 has q5_K and q6_K group kernels; other ISAs leave those matrices unpacked.
// Invariants: qs is 64-byte aligned and every vector is a whole 64 bytes; only rows [0, 16*n_groups)
// are packed: the n_out % 16 tail rows stay in the original matrix (WeightMatrix::data) and go
// through the row kernels. The packed bytes are exactly as many as the original (18 resp. 34 bytes per
// block and row), so memory is held twice while the original pages stay resident; the model loader
// drops them from its file map where matmul no longer reads them (matmul_reads_original(), see
// model/weights.cpp and docs/PERFORMANCE_matmul.md).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/dtype.h"

namespace polykv::cpu {

constexpr int kPackRows = 16;  // rows per interleaved group

// A buffer for packed weights (PackedMatrix::qs), 64-byte aligned, in memory advised for transparent huge
// pages (Linux MADV_HUGEPAGE, honoured where THP is "always" or "madvise"): buffers of 2 MiB or more are 2 MiB
// aligned allocations of their own; smaller ones (MoE experts) are carved from shared 64 MiB chunks, each freed
// with its last buffer. A model's packed copy is then faulted in 2 MiB at a time (loading a 4.3 GB MoE cut took
// 1.4 M page faults) and decode streams it with 512x fewer TLB entries. Thread-safe; throws Error when out of
// memory. The deleter returns the buffer to wherever it came from. POLYKV_THP=0 in the environment leaves
// out the huge-page advice (A/B runs; hosts where THP misbehaves).
std::unique_ptr<uint8_t, void (*)(void*)> alloc_packed_bytes(size_t bytes);

struct PackedMatrix {
  DType type = DType::F32;  // Q4_0, Q8_0, MXFP4, Q4_K, Q5_K or Q6_K; or TQ1_0, TQ2_0, PTQ1_0 (ternary_lut.h)
  int64_t n_in = 0;         // values per row (a multiple of the type's block)
  int64_t n_groups = 0;     // packed rows = rows_per_group * n_groups
  int rows_per_group = kPackRows;  // 16; 64 for the ternary LUT layout (ternary_lut.h: its own records)
  std::unique_ptr<uint8_t, void (*)(void*)> qs{nullptr, nullptr};  // 64-byte aligned
  std::unique_ptr<uint16_t[]> d;

  int64_t n_blocks() const {
    return n_in / (type == DType::Q4_K || type == DType::Q5_K || type == DType::Q6_K ? 256 : 32);
  }
  size_t qs_block_bytes() const {  // per group and block
    switch (type) {
      case DType::Q4_0:
      case DType::MXFP4: return 256;
      case DType::Q4_K: return 2304;
      case DType::Q5_K: return 2816;
      case DType::Q6_K: return 3392;
      default: return 512;
    }
  }
  const uint8_t* qs_at(int64_t g, int64_t b) const { return qs.get() + size_t(g * n_blocks() + b) * qs_block_bytes(); }
  const uint16_t* d_at(int64_t g, int64_t b) const { return d.get() + size_t(g * n_blocks() + b) * kPackRows; }
};

// True if pack_matrix() has a layout for `type`.
bool packable(DType type);

// Repacks rows [0, 16 * (n_out / 16)) of a q4_0 / q8_0 / mxfp4 / q4_K / q5_K / q6_K matrix (rows row_stride bytes apart); null if
// the type is not packable or there is not one whole group.
std::unique_ptr<PackedMatrix> pack_matrix(DType type, const void* data, int64_t n_in, int64_t n_out,
                                          size_t row_stride);

struct ActRow;

// Group kernel: rows 16g .. 16g+15 of a packed matrix against n_tok tokens (1 <= n_tok <= 8):
//   y[t * ldy + r] = Σ_i W[16g + r][i] * act[t][i]   for t < n_tok, r < 16.
constexpr int kMaxPackedTokens = 8;
using PackedDotFn = void (*)(const PackedMatrix& p, int64_t g, const ActRow* act, int n_tok, float* y,
                             int64_t ldy);

// Scalar reference of the group kernel (any CPU; reads the packed layout, integer dot per block).
PackedDotFn packed_dot_scalar(DType type);
// AVX-512 VNNI group kernel; nullptr where there is none. Only call on a CPU with the AVX-512 set.
PackedDotFn packed_dot_avx512(DType type);
// AVX2 group kernels (packed_kernels_avx2.h; q4_0, q8_0, mxfp4, q4_K, q5_K, q6_K), bit-identical to the
// AVX-512 one where that has the type; nullptr where the
// CPU lacks the ISA or the type has none. packed_dot_avx2 takes the AVX-VNNI variant where present.
PackedDotFn packed_dot_avx2(DType type);
PackedDotFn packed_dot_avx2_maddubs(DType type);  // without VNNI (AVX2 + FMA + F16C)
PackedDotFn packed_dot_avxvnni(DType type);       // AVX2 + AVX-VNNI

}  // namespace polykv::cpu
