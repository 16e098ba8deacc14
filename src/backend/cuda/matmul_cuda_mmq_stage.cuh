// Shared-memory staging of the quantized mat-mul kernel ("mmq", matmul_cuda_mmq2.cu), host and device
// code, tested on the CPU by tests/cuda_mmq_stage_test.cpp.
//
// The kernel's fragments (matmul_cuda_mmq.cuh: a chunk = 4 units = 128 values of a row, thread t of a
// quad takes unit 4 c + t, word j of the decoded unit fills k-step j) and values (unit_word_values
// rounded to f16, mma_fragments.cuh) are fed from shared memory filled by cp.async, several chunks ahead:
//
// Weights of stage (chunk c), per CTA row r (kMmq2Rows rows), two regions:
//   A[r][kPitchA]: the 4 units' quant bytes in unit order (q4_0 / q4_K / q6_K ql: 4 x 16 B, pitch 64;
//                  q8_0: 4 x 32 B, pitch 144 so that rows g and g + 1 fall in other banks);
//   B[r][kPitchB]: the rest: q4_0 / q8_0 the 4 blocks' d (8 B); q4_K the block's 16-byte head; q5_K the 4
//                  units' qh words (16 B) and the block's head; q6_K the 4 units' repacked qh (32 B), scale
//                  pairs (8 B) and the 4-byte word holding d.
// Each region is copied with `kPieces` cp.async of 4, 8 or 16 bytes per row (MmqStage<T>::piece): the
// first kPiecesA are region A's, 16 bytes each, at dst 16 k (the kernel spreads them over consecutive
// lanes, so that a warp reads whole 32-byte sectors); a unit past the row's last one is zero-filled
// (its A fragment is also forced to 0 by the kernel). Reading unit t
// back (mmq_stage_unit) gives Split<T>::load's words exactly (tested).
//
// Activations of stage c, per column: the 128 f16 values x[col][128 c .. 128 c + 127] reordered so that
// the 8 values a thread needs for k-steps 2 jp and 2 jp + 1 of unit t (mmq_value_pos(.., 2 jp, 0), 8
// consecutive values) are the 16 bytes at slot 4 jp + t: one 16-byte cp.async per slot, one 16-byte
// shared load per (n tile, jp) giving both B fragments. Column pitch 320 B (256 + 64): the 8 lanes of a
// quarter warp (g = 0, 1; t = 0..3) hit 8 different 16-byte bank groups.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backend/cuda/matmul_cuda_mmq.cuh"
#include "backend/cuda/matmul_cuda_split.cuh"
#include "core/fp16.h"

namespace polykv::cuda::hd {

constexpr int kMmq2Warps = 8;                       // warps per CTA, 32 rows each (two m16 tiles)
constexpr int kMmq2Rows = kMmq2Warps * 32;          // rows per CTA
constexpr int kMmq2XPitch = 320;                    // bytes per staged column (128 f16 + 64 B skew)
constexpr int kMmq2XSlots = 16;                     // 16-byte slots per staged column
// Most K splits: a 1024-row k / v projection is 4 row blocks; 16 splits make 64 CTAs.
constexpr int kMmq2MaxSplits = 16;

// One cp.async of a row's chunk: `bytes` from row offset `src` to region (0: A, 1: B) offset `dst`;
// `valid` false: zero-fill (a unit past the row's end).
struct MmqPiece {
  int64_t src = 0;
  int dst = 0;
  int bytes = 0;
  int region = 0;
  bool valid = true;
};

template <class T>
struct MmqStage;

// Chunk c's units 4c .. 4c+3 (valid while < n_units).
POLYKV_HD bool mmq_unit_valid(const SplitGeom& g, int64_t c, int k) { return 4 * c + k < g.n_units; }

template <>
struct MmqStage<DecQ4_0> {
  static constexpr int kPitchA = 64, kPitchB = 8, kPieces = 5, kPiecesA = 4;
  POLYKV_HD static MmqPiece piece(const SplitGeom& g, int64_t c, int k) {
    MmqPiece p;
    if (k < 4) {
      p.src = 16 * (4 * c + k), p.dst = 16 * k, p.bytes = 16, p.region = 0, p.valid = mmq_unit_valid(g, c, k);
    } else {  // the 4 blocks' d: 8 bytes, inside the padded row even past the last block
      p.src = g.head_offset + 8 * c, p.dst = 0, p.bytes = 8, p.region = 1;
    }
    return p;
  }
};

template <>
struct MmqStage<DecQ8_0> {
  static constexpr int kPitchA = 144, kPitchB = 8, kPieces = 9, kPiecesA = 8;
  POLYKV_HD static MmqPiece piece(const SplitGeom& g, int64_t c, int k) {
    MmqPiece p;
    if (k < 8) {
      p.src = 32 * (4 * c) + 16 * k, p.dst = 16 * k, p.bytes = 16, p.region = 0, p.valid = mmq_unit_valid(g, c, k / 2);
    } else {
      p.src = g.head_offset + 8 * c, p.dst = 0, p.bytes = 8, p.region = 1;
    }
    return p;
  }
};

template <>
struct MmqStage<DecQ4_K> {  // 8 units a block: a chunk is half a block, always whole
  static constexpr int kPitchA = 64, kPitchB = 16, kPieces = 5, kPiecesA = 4;
  POLYKV_HD static MmqPiece piece(const SplitGeom& g, int64_t c, int k) {
    MmqPiece p;
    if (k < 4) {
      p.src = 16 * (4 * c + k), p.dst = 16 * k, p.bytes = 16, p.region = 0, p.valid = mmq_unit_valid(g, c, k);
    } else {
      p.src = g.head_offset + 16 * (c / 2), p.dst = 0, p.bytes = 16, p.region = 1;
    }
    return p;
  }
};

template <>
struct MmqStage<DecQ5_K> {  // 8 units a block: a chunk is half a block, always whole
  static constexpr int kPitchA = 64, kPitchB = 32, kPieces = 6, kPiecesA = 4;
  POLYKV_HD static MmqPiece piece(const SplitGeom& g, int64_t c, int k) {
    using S = Split<DecQ5_K>;
    MmqPiece p;
    if (k < 4) {
      p.src = 16 * (4 * c + k), p.dst = 16 * k, p.bytes = 16, p.region = 0, p.valid = mmq_unit_valid(g, c, k);
    } else if (k == 4) {  // the 4 units' qh words: 4 B per unit
      p.src = S::qh_offset(g) + 16 * c, p.dst = 0, p.bytes = 16, p.region = 1;
    } else {
      p.src = g.head_offset + 16 * (c / 2), p.dst = 16, p.bytes = 16, p.region = 1;
    }
    return p;
  }
};

template <>
struct MmqStage<DecQ6_K> {  // 8 units a block: chunks always whole
  static constexpr int kPitchA = 64, kPitchB = 48, kPieces = 8, kPiecesA = 4;
  POLYKV_HD static MmqPiece piece(const SplitGeom& g, int64_t c, int k) {
    using S = Split<DecQ6_K>;
    MmqPiece p;
    if (k < 4) {
      p.src = 16 * (4 * c + k), p.dst = 16 * k, p.bytes = 16, p.region = 0, p.valid = mmq_unit_valid(g, c, k);
    } else if (k < 6) {  // qh: 8 B per unit
      p.src = S::qh_offset(g) + 32 * c + 16 * (k - 4), p.dst = 16 * (k - 4), p.bytes = 16, p.region = 1;
    } else if (k == 6) {  // scale pairs: 2 B per unit
      p.src = S::sc_offset(g) + 8 * c, p.dst = 32, p.bytes = 8, p.region = 1;
    } else {  // the aligned word holding block c / 2's d (blocks 2 i and 2 i + 1)
      p.src = g.head_offset + 4 * (c / 4), p.dst = 40, p.bytes = 4, p.region = 1;
    }
    return p;
  }
};

// Plain reads of staged bytes (shared memory on the device; p aligned to the size).
POLYKV_HD void st_ld16(const uint8_t* p, uint32_t* w) {
#ifdef __CUDA_ARCH__
  const uint4 v = *reinterpret_cast<const uint4*>(p);
  w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
#else
  std::memcpy(w, p, 16);
#endif
}
POLYKV_HD uint32_t st_ld32(const uint8_t* p) {
#ifdef __CUDA_ARCH__
  return *reinterpret_cast<const uint32_t*>(p);
#else
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
#endif
}
POLYKV_HD uint32_t st_ld16bit(const uint8_t* p) {
#ifdef __CUDA_ARCH__
  return *reinterpret_cast<const uint16_t*>(p);
#else
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
#endif
}

// Unit t (0..3) of chunk c of a staged row (a: its A bytes, b: its B bytes): Split<T>::load's words.
template <class T>
POLYKV_HD void mmq_stage_unit(const uint8_t* a, const uint8_t* b, int64_t c, int t,
                              uint32_t (&q)[Split<T>::kUnitWords], uint32_t (&h)[Split<T>::kHeadWords]) {
  if constexpr (T::kBlockValues == 32 && Split<T>::kUnitBytes == 16) {  // q4_0
    st_ld16(a + 16 * t, q);
    h[0] = st_ld16bit(b + 2 * t);
  } else if constexpr (T::kBlockValues == 32) {  // q8_0
    st_ld16(a + 32 * t, q);
    st_ld16(a + 32 * t + 16, q + 4);
    h[0] = st_ld16bit(b + 2 * t);
  } else if constexpr (std::is_same_v<T, DecQ5_K>) {
    st_ld16(a + 16 * t, q);
    q[4] = st_ld32(b + 4 * t);
    st_ld16(b + 16, h);
  } else if constexpr (Split<T>::kHeadBytes == 16) {  // q4_K
    st_ld16(a + 16 * t, q);
    st_ld16(b, h);
  } else {  // q6_K
    st_ld16(a + 16 * t, q);
    q[4] = st_ld32(b + 8 * t);
    q[5] = st_ld32(b + 8 * t + 4);
    q[6] = st_ld16bit(b + 32 + 2 * t);
    h[0] = st_ld16bit(b + 40 + 2 * ((c / 2) % 2));
  }
}

// Chunk c's units of a thread's kNR rows from a stage (sa, sb: the stage's A and B regions): row
// row0 + 8 r + g for r < kNR (both kernels: a warp's rows, m tile r / 2, upper half r % 2), unit 4 c + t,
// decoded; d2[r] = the unit's f16 d twice (the f16-dequantizing q4_0 / q8_0 kernels), 0 for a unit past
// the row's last (which makes every value of its A fragment 0).
template <class T, int kNR>
POLYKV_HD void mmq_stage_units(const uint8_t* sa, const uint8_t* sb, int row0, int g, int t, int64_t c,
                               const SplitGeom& geom, typename T::Unit (&wu)[kNR], uint32_t (&d2)[kNR]) {
  using S = Split<T>;
  using G = MmqStage<T>;
  const int64_t u = kMmqUnitsPerChunk * c + t;
  const bool has = u < geom.n_units;
  const int part = int(u % T::kParts);
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
  for (int r = 0; r < kNR; ++r) {
    const int lr = row0 + 8 * r + g;
    uint32_t q[S::kUnitWords], h[S::kHeadWords];
    mmq_stage_unit<T>(sa + lr * G::kPitchA, sb + lr * G::kPitchB, c, t, q, h);
    S::decode(q, h, part, wu[r]);
    d2[r] = has ? (h[0] & 0xFFFFu) * 0x10001u : 0u;
  }
}

// The epilogue of both kernels: the warp's kMT m16 tiles x NT n8 tiles in mma.m16n8k16's C layout
// (acc(mt, nt, k): rows g, g + 8 of tile mt, columns 2t, 2t + 1 of tile nt) to out [ncols][n_out] from
// row wrow on, inside n_out and ncols.
template <int kMT, int NT, class Acc>
POLYKV_HD void mmq_store_tiles(float* out, int64_t n_out, int ncols, int64_t wrow, int g, int t, const Acc& acc) {
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
  for (int mt = 0; mt < kMT; ++mt) {
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
    for (int nt = 0; nt < NT; ++nt) {
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
      for (int k = 0; k < 4; ++k) {
        const int64_t row = wrow + 16 * mt + g + 8 * (k / 2);
        const int col = 8 * nt + 2 * t + k % 2;
        if (row < n_out && col < ncols) out[int64_t(col) * n_out + row] = acc(mt, nt, k);
      }
    }
  }
}

// Activations: staged slot s (0..15) = 4 jp + t holds the 8 values of x at chunk-relative position
// mmq_x_slot_pos(c, s) (k-steps 2 jp, 2 jp + 1 of unit 4 c + t).
template <class T>
POLYKV_HD int64_t mmq_x_slot_pos(int64_t c, int s) {
  const int jp = s / 4, t = s % 4;
  const int64_t u = 4 * c + t;
  return mmq_value_pos<T>(u / T::kParts, int(u % T::kParts), 2 * jp, 0);
}

// The K split: row blocks of kMmq2Rows times `splits`, about one wave of CTAs (ctas_per_sm per SM):
// floor(SMs x ctas_per_sm / row blocks), 1..kMmq2MaxSplits, each split non-empty. Depends on the matrix
// and the device only.
inline MmqPlan mmq2_plan(int64_t n_out, int64_t n_units, int sm_count, int ctas_per_sm, int forced_splits) {
  MmqPlan p;
  p.row_blocks = (n_out + kMmq2Rows - 1) / kMmq2Rows;
  p.n_chunks = (n_units + kMmqUnitsPerChunk - 1) / kMmqUnitsPerChunk;
  int64_t s = forced_splits > 0 ? forced_splits : int64_t(sm_count) * ctas_per_sm / p.row_blocks;
  if (s > kMmq2MaxSplits) s = kMmq2MaxSplits;
  if (s > p.n_chunks) s = p.n_chunks;
  if (s < 1) s = 1;
  p.chunks_per_split = (p.n_chunks + s - 1) / s;
  p.splits = int((p.n_chunks + p.chunks_per_split - 1) / p.chunks_per_split);
  return p;
}

// Shared memory of one stage: A, B (kMmq2Rows rows) and 8 * nt columns of x.
template <class T>
POLYKV_HDC constexpr int mmq2_stage_bytes(int nt) {
  return kMmq2Rows * (MmqStage<T>::kPitchA + MmqStage<T>::kPitchB) + 8 * nt * kMmq2XPitch;
}

// cp.async ring depth (chunks in flight + the one computed): 3 with 8 n tiles (174 KB for q8_0), 4 with
// fewer (memory-bound: more bytes in flight; <= 196 KB). The math does not depend on it.
POLYKV_HDC constexpr int mmq2_stages(int nt) { return nt >= 8 ? 3 : 4; }
template <class T>
POLYKV_HDC constexpr int mmq2_smem_bytes(int nt) { return mmq2_stages(nt) * mmq2_stage_bytes<T>(nt); }

// ---- The wgmma kernel's activations (matmul_cuda_mmq3_sm90a.cu, sm_90a) ----
// wgmma reads B from shared memory in core matrices (wgmma.cuh): 8 columns x 8 k slots, 16 bytes a
// column. k-step j's 16 slots are those of the mma.sync kernel (slots 2t, 2t+1, 2t+8, 2t+9 = values
// e = 0, 1, 2, 3 of word j of unit 4c + t), so slot 8h + 2t + e' (h, e' in {0, 1}) holds value 2h + e'
// of that word: core matrix h of k-step j takes, per column, the 8 values of slots 8h .. 8h + 7.
// x is converted to f16 once per call into that order ("permuted x", per weight type T):
//   [column group cg = col / 8][chunk c][k-step j][h][col % 8][8 values]   (f16)
// so that every core matrix is 128 contiguous bytes in global memory as in shared memory, where stage
// slot (j, cg, h) sits at mmq3_x_stage_offset. Columns past the call's last and units past a row's
// last hold zeros (the weights' A fragments are zero there too).
constexpr int kMmq3CoreBytes = 128;                    // one core matrix: 8 columns x 16 bytes
constexpr int kMmq3GroupChunkHalves = 8 * 2 * 64;      // one column group's chunk: 8 k-steps x 2 x 64 f16

// f16 values of the permuted x of ncols columns (the scratch's size / 2).
POLYKV_HDC constexpr int64_t mmq3_x_halves(int64_t n_units, int ncols) {
  return int64_t((ncols + 7) / 8) * ((n_units + kMmqUnitsPerChunk - 1) / kMmqUnitsPerChunk) * kMmq3GroupChunkHalves;
}

// Permuted index i (0 .. mmq3_x_halves) -> column (through `col`) and position in x's row, or -1 for a zero
// (a unit past the row's last, or a column >= ncols).
template <class T>
POLYKV_HD int64_t mmq3_x_source(const SplitGeom& g, int ncols, int64_t i, int& col) {
  const int64_t n_chunks = (g.n_units + kMmqUnitsPerChunk - 1) / kMmqUnitsPerChunk;
  const int e8 = int(i % 8), r = int((i / 8) % 8), h = int((i / 64) % 2), j = int((i / 128) % 8);
  const int64_t gc = i / kMmq3GroupChunkHalves;  // cg * n_chunks + c
  const int64_t cg = gc / n_chunks, c = gc % n_chunks;
  col = int(8 * cg + r);
  const int t = e8 / 2, e = 2 * h + e8 % 2;
  const int64_t u = kMmqUnitsPerChunk * c + t;
  if (col >= ncols || u >= g.n_units) return -1;
  return mmq_value_pos<T>(u / T::kParts, int(u % T::kParts), j, e);
}

// Byte offset, in a stage's x region of nt n tiles, of core matrix (k-step j, column group cg, half h):
// k-step j's B operand is [cg][h] at j * nt * 256, so its descriptor has LBO 128 (h) and SBO 256 (cg).
POLYKV_HDC constexpr int mmq3_x_stage_offset(int nt, int j, int cg, int h) {
  return j * nt * 2 * kMmq3CoreBytes + cg * 2 * kMmq3CoreBytes + h * kMmq3CoreBytes;
}
// Byte offset, in the permuted x, of core matrix (j, h) of column group cg's chunk c.
POLYKV_HDC constexpr int64_t mmq3_x_global_offset(int64_t n_chunks, int64_t cg, int64_t c, int j, int h) {
  return ((cg * n_chunks + c) * 16 + 2 * j + h) * kMmq3CoreBytes;
}

// The wgmma kernel's stages: 4, three chunks in flight while one is computed; the x region is nt x 2 KB.
constexpr int kMmq3Stages = 4;
template <class T>
POLYKV_HDC constexpr int mmq3_stage_bytes(int nt) {
  return kMmq2Rows * (MmqStage<T>::kPitchA + MmqStage<T>::kPitchB) + nt * 8 * 2 * kMmq3CoreBytes;
}
template <class T>
POLYKV_HDC constexpr int mmq3_smem_bytes(int nt) { return kMmq3Stages * mmq3_stage_bytes<T>(nt); }

}  // namespace polykv::cuda::hd
