// The split row layout of quantized weights in device memory (WeightLayout::CudaSplit), host and
// device code (matmul_cuda_hd.cuh), tested on the CPU by tests/cuda_matvec_split_test.cpp.
//
// A ggml row of q4_0 is 18-byte blocks (f16 d, 16 bytes of nibbles): a lane's 16 nibble bytes are
// only 2-byte aligned, so they take narrow loads or a staging copy (matmul_cuda_stream.cu). The split
// layout keeps each row in its own row_stride bytes (row slices stay valid) but moves the bytes:
//   row = [units: n_units x kUnitBytes][heads: n_blocks x kHeadBytes][zero padding to 16 bytes]
// where unit u = (block u / kParts, part u % kParts) is the unit of matmul_cuda_decode.cuh (the
// values one lane decodes) and its quant bytes are kUnitBytes contiguous, 16-byte aligned bytes;
// the head of a block holds its scales. So lane l of a warp reading unit 32 j + l of a row issues one
// 16-byte load (two for q8_0) and 32 lanes read 512 contiguous bytes, plus a small coalesced load of
// the heads. Every unit decodes to the same hd::QUnit, field for field, as Dec::load on the ggml
// block (same operations), so the dot products are the same bits as the other kernels'.
//   q4_0: unit = block, 16 bytes of qs; head = d (2 bytes).       same bytes per block (18)
//   q8_0: unit = block, 32 bytes of qs; head = d (2 bytes).       same bytes per block (34)
//   q4_K: unit = 16 bytes of qs (part 2j + h at qs[32 j + 16 h], i.e. qs in order); head = d, dmin and
//         the 12 scale bytes re-ordered per lane pair (16 bytes, one aligned load shared by the block's 8
//         lanes; Split<DecQ4_K> below). same (144)
//   q6_K: unit = 16 bytes of ql + 8 bytes of its repacked qh bits + its 2 scales (three regions);
//         head = d (2 bytes).                                     same (210)
// The row stride is the split row's bytes rounded up to 16 (the ggml stride when that is a multiple of 16).
#pragma once
#include <cstdint>
#include <cstring>

#include "backend/cuda/matmul_cuda_decode.cuh"
#include "core/dtype.h"
#include "quant/kquant_scales.h"

namespace polykv::cuda::hd {

// Geometry of a split row of n_in values of a type whose units take kUnitBytes and blocks kHeadBytes.
struct SplitGeom {
  int64_t n_units = 0;      // units per row
  int64_t head_offset = 0;  // byte offset of the heads in a row (n_units * kUnitBytes, 16-byte aligned)
  size_t row_bytes = 0;     // the stride: units + heads, rounded up to 16
};

// Loads from a split row (device: vector loads that bypass L1 and ask L2 for 256-byte sectors, the
// weights being read once; host: memcpy). p aligned to the load's size. volatile: the compiler must
// not hoist a load above the bounds check that guards it (ptxas still schedules them freely).
POLYKV_HD void ld_stream_16B(const uint8_t* p, uint32_t* w) {
#ifdef __CUDA_ARCH__
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
      : "l"(p));
#else
  std::memcpy(w, p, 16);
#endif
}

POLYKV_HD void ld_stream_8B(const uint8_t* p, uint32_t* w) {
#ifdef __CUDA_ARCH__
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v2.u32 {%0, %1}, [%2];" : "=r"(w[0]), "=r"(w[1]) : "l"(p));
#else
  std::memcpy(w, p, 8);
#endif
}

POLYKV_HD uint32_t ld_stream_u16(const uint8_t* p) {
#ifdef __CUDA_ARCH__
  unsigned short v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.u16 %0, [%1];" : "=h"(v) : "l"(p));
  return v;
#else
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
#endif
}

POLYKV_HD uint32_t ld_stream_u32(const uint8_t* p) {
#ifdef __CUDA_ARCH__
  uint32_t v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.u32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
#else
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
#endif
}

inline uint32_t host_word(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

template <class T>
struct Split;  // defined for the types with a split layout

// Types whose block is [head: HeadBytes][the units' quants: kParts x UnitBytes, unit order]: the split
// row holds the units' bytes as they are, the heads after.
template <class T, int UnitBytes, int HeadBytes>
struct PlainSplit {
  static constexpr int kUnitBytes = UnitBytes, kHeadBytes = HeadBytes;
  static constexpr int kUnitWords = UnitBytes / 4, kHeadWords = HeadBytes == 2 ? 1 : HeadBytes / 4;
  // 16-byte loads per unit (a 16-byte head counts as one; the 8 lanes of a q4_K block share it).
  static constexpr int kLoadsPerUnit = UnitBytes / 16 + (HeadBytes >= 16 ? 1 : 0);
  static_assert(HeadBytes + T::kParts * UnitBytes == T::kBlockBytes, "a block keeps its bytes");
  // Block blk (ggml bytes at b) into the split row `row`, and back.
  static void pack(const uint8_t* b, uint8_t* row, const SplitGeom& g, int64_t blk) {
    std::memcpy(row + g.head_offset + blk * HeadBytes, b, HeadBytes);
    std::memcpy(row + blk * T::kParts * UnitBytes, b + HeadBytes, T::kParts * UnitBytes);
  }
  static void unpack(const uint8_t* row, const SplitGeom& g, int64_t blk, uint8_t* b) {
    std::memcpy(b, row + g.head_offset + blk * HeadBytes, HeadBytes);
    std::memcpy(b + HeadBytes, row + blk * T::kParts * UnitBytes, T::kParts * UnitBytes);
  }
  // Unit u's quant words and its block's head words (row 16-byte aligned).
  POLYKV_HD static void load(const uint8_t* row, const SplitGeom& g, int64_t u, uint32_t (&q)[kUnitWords],
                             uint32_t (&h)[kHeadWords]) {
#pragma unroll
    for (int k = 0; k < UnitBytes / 16; ++k) ld_stream_16B(row + u * UnitBytes + 16 * k, q + 4 * k);
    const uint8_t* head = row + g.head_offset + (u / T::kParts) * HeadBytes;
    if constexpr (HeadBytes == 2) {
      h[0] = ld_stream_u16(head);
    } else {
      static_assert(HeadBytes == 16, "heads of 2 or 16 bytes");
      ld_stream_16B(head, h);
    }
  }
};

// q4_0: d (2 bytes), qs[16]. The same operations as DecQ4_0::load.
template <>
struct Split<DecQ4_0> : PlainSplit<DecQ4_0, 16, 2> {
  POLYKV_HD static void decode(const uint32_t (&q)[kUnitWords], const uint32_t (&h)[kHeadWords], int /*part*/,
                               DecQ4_0::Unit& u) {
    split_nibbles(q, u);
    const float d = half_to_f32(uint16_t(h[0]));
    u.scale[0] = d;
    u.min[0] = fmul(-8.0f, d);
  }
};

// q8_0: d (2 bytes), qs[32]. The same operations as DecQ8_0::load.
template <>
struct Split<DecQ8_0> : PlainSplit<DecQ8_0, 32, 2> {
  POLYKV_HD static void decode(const uint32_t (&q)[kUnitWords], const uint32_t (&h)[kHeadWords], int /*part*/,
                               DecQ8_0::Unit& u) {
#pragma unroll
    for (int k = 0; k < 8; ++k) u.q[k] = q[k];
    u.scale[0] = half_to_f32(uint16_t(h[0]));
    u.min[0] = 0.0f;
  }
};

// Bytes jj (0..3) of w1, w2, w3 as bits 0-7, 8-15, 16-23 of one word (bits 24-31 are not defined: callers mask).
// Device: two byte permutes (selectors that depend on jj only).
POLYKV_HD uint32_t gather_byte3(uint32_t w1, uint32_t w2, uint32_t w3, int jj) {
#ifdef __CUDA_ARCH__
  const uint32_t t = __byte_perm(w1, w2, uint32_t(jj) | uint32_t(jj + 4) << 4);
  return __byte_perm(t, w3, 0x10u | uint32_t(jj + 4) << 8);
#else
  const int sh = 8 * jj;
  return ((w1 >> sh) & 0xFFu) | ((w2 >> sh) & 0xFFu) << 8 | ((w3 >> sh) & 0xFFu) << 16;
#endif
}

// The 16-byte head of a q4_K / q5_K block in the split layout: d, dmin and the 12 scale bytes re-ordered so that a
// lane finds its two sub-blocks' 6-bit scales and mins without ggml's branchy unpacking (kquant_scale_min: a j < 4
// test that splits every block's 8 lanes in two, and byte selects on j):
//   word 0            d | dmin << 16, as ggml
//   words 1, 2, 3     byte jj of word 1 + k = bits [8k, 8k + 8) of F_jj (jj = 0..3: the sub-blocks 2jj, 2jj + 1
//                     that parts 2jj and 2jj + 1 read), where
//                     F_jj = sc(2jj) | m(2jj) << 6 | sc(2jj + 1) << 12 | m(2jj + 1) << 18
// 96 bits of 6-bit values in 96 bits: a bijection of ggml's 12 scale bytes (unpack_scales inverts it, the tests
// check that every row round-trips). decode_scales gives DecQ4_K::load's / DecQ5_K::load's scale and min fields
// bit for bit: the same integers, then the same operations (d * sc, -(dmin * m)).
struct KQuantHead {
  // ggml's 12 scale bytes -> words 1..3 of the split head.
  static void pack_scales(const uint8_t* scales, uint32_t (&w)[3]) {
    w[0] = w[1] = w[2] = 0;
    for (int jj = 0; jj < 4; ++jj) {
      const ScaleMin a = kquant_scale_min(2 * jj, scales), b = kquant_scale_min(2 * jj + 1, scales);
      const uint32_t f = uint32_t(a.scale) | uint32_t(a.min) << 6 | uint32_t(b.scale) << 12 | uint32_t(b.min) << 18;
      for (int k = 0; k < 3; ++k) w[k] |= ((f >> (8 * k)) & 0xFFu) << (8 * jj);
    }
  }
  // The inverse: words 1..3 -> ggml's 12 bytes (kquant_scale_min's rule read backwards).
  static void unpack_scales(const uint32_t (&w)[3], uint8_t* scales) {
    uint8_t sc[8], mn[8];
    for (int jj = 0; jj < 4; ++jj) {
      const uint32_t f = gather_byte3(w[0], w[1], w[2], jj);
      sc[2 * jj] = uint8_t(f & 63), mn[2 * jj] = uint8_t((f >> 6) & 63);
      sc[2 * jj + 1] = uint8_t((f >> 12) & 63), mn[2 * jj + 1] = uint8_t((f >> 18) & 63);
    }
    for (int j = 0; j < 4; ++j) {
      scales[j] = uint8_t(sc[j] | (sc[j + 4] >> 4) << 6);
      scales[j + 4] = uint8_t(mn[j] | (mn[j + 4] >> 4) << 6);
      scales[j + 8] = uint8_t((sc[j + 4] & 0x0F) | (mn[j + 4] & 0x0F) << 4);
    }
  }
  // ggml's 16 head bytes (d, dmin, scales) <-> the split head's.
  static void pack(const uint8_t* ggml, uint8_t* head) {
    uint32_t w[3];
    pack_scales(ggml + 4, w);
    std::memcpy(head, ggml, 4);
    std::memcpy(head + 4, w, 12);
  }
  static void unpack(const uint8_t* head, uint8_t* ggml) {
    uint32_t w[3];
    std::memcpy(w, head + 4, 12);
    std::memcpy(ggml, head, 4);
    unpack_scales(w, ggml + 4);
  }
  // Part `part`'s two groups (sub-blocks 2 (part / 2) and + 1): u.scale[0..1], u.min[0..1].
  template <class U>
  POLYKV_HD static void decode_scales(const uint32_t (&h)[4], int part, U& u) {
    const float d = half_to_f32(uint16_t(h[0] & 0xFFFF)), dmin = half_to_f32(uint16_t(h[0] >> 16));
    const uint32_t f = gather_byte3(h[1], h[2], h[3], part / 2);
    u.scale[0] = fmul(d, float(f & 63));
    u.min[0] = -fmul(dmin, float((f >> 6) & 63));
    u.scale[1] = fmul(d, float((f >> 12) & 63));
    u.min[1] = -fmul(dmin, float((f >> 18) & 63));
  }
};

// q4_K: d, dmin, scales[12] (16 bytes), qs[128] (part p's 16 bytes at 16 p). The quants are ggml's, the head is
// KQuantHead's. decode gives DecQ4_K::load's unit field for field.
template <>
struct Split<DecQ4_K> : PlainSplit<DecQ4_K, 16, 16> {
  static void pack(const uint8_t* b, uint8_t* row, const SplitGeom& g, int64_t blk) {
    PlainSplit::pack(b, row, g, blk);
    KQuantHead::pack(b, row + g.head_offset + blk * kHeadBytes);
  }
  static void unpack(const uint8_t* row, const SplitGeom& g, int64_t blk, uint8_t* b) {
    PlainSplit::unpack(row, g, blk, b);
    KQuantHead::unpack(row + g.head_offset + blk * kHeadBytes, b);
  }
  POLYKV_HD static void decode(const uint32_t (&q)[kUnitWords], const uint32_t (&h)[kHeadWords], int part,
                               DecQ4_K::Unit& u) {
    split_nibbles(q, u);
    KQuantHead::decode_scales(h, part, u);
  }
};

// q5_K: d, dmin, scales[12], qh[32], qs[128]. Unit p = 2j + h (matmul_cuda_decode.cuh) reads qs[16 p .. 16 p + 16)
// and, as its values' fifth bits, bits 2j (run 0) and 2j + 1 (run 1) of qh[16 h .. 16 h + 16). Split row:
//   [qs: 16 per unit][qh bits: 4 per unit][heads: 16 per block, KQuantHead's]
// (8 x 16 + 8 x 4 + 16 = 176 bytes per block, as ggml's). A unit's qh word W holds in byte b the fifth bits of
// values 4k + b, k = 0..3: run 0's at bits k, run 1's at bits 4 + k; so word k of run 0 takes
// ((W >> k) & 0x01010101) << 4 and of run 1 ((W >> (4 + k)) & 0x01010101) << 4: DecQ5_K::load's words exactly.
template <>
struct Split<DecQ5_K> {
  static constexpr int kUnitBytes = 16 + 4, kHeadBytes = 16;
  static constexpr int kUnitWords = 4 + 1, kHeadWords = 4;
  static constexpr int kLoadsPerUnit = 2;  // the qs and the head (the 4-byte qh word not counted)
  static_assert(kHeadBytes + DecQ5_K::kParts * kUnitBytes == DecQ5_K::kBlockBytes, "a block keeps its bytes");
  POLYKV_HD static int64_t qh_offset(const SplitGeom& g) { return 16 * g.n_units; }
  // The unit's qh word from the 16 qh bytes it reads (qh16[i] = qh[16 h + i]) and j, and back.
  static uint32_t qh_word(const uint8_t* qh16, int j) {
    uint32_t w = 0;
    for (int k = 0; k < 4; ++k)
      for (int b = 0; b < 4; ++b) {
        const uint32_t v = qh16[4 * k + b];
        w |= ((v >> (2 * j)) & 1u) << (8 * b + k);
        w |= ((v >> (2 * j + 1)) & 1u) << (8 * b + 4 + k);
      }
    return w;
  }
  static void unpack_qh_word(uint32_t w, int j, uint8_t* qh16) {
    for (int k = 0; k < 4; ++k)
      for (int b = 0; b < 4; ++b) {
        uint8_t& v = qh16[4 * k + b];
        v = uint8_t(v | ((w >> (8 * b + k)) & 1u) << (2 * j) | ((w >> (8 * b + 4 + k)) & 1u) << (2 * j + 1));
      }
  }
  static void pack(const uint8_t* b, uint8_t* row, const SplitGeom& g, int64_t blk) {
    for (int p = 0; p < 8; ++p) {
      const int64_t u = blk * 8 + p;
      std::memcpy(row + 16 * u, b + 48 + 16 * p, 16);
      const uint32_t w = qh_word(b + 16 + 16 * (p % 2), p / 2);
      std::memcpy(row + qh_offset(g) + 4 * u, &w, 4);
    }
    KQuantHead::pack(b, row + g.head_offset + blk * kHeadBytes);
  }
  static void unpack(const uint8_t* row, const SplitGeom& g, int64_t blk, uint8_t* b) {
    std::memset(b + 16, 0, 32);
    for (int p = 0; p < 8; ++p) {
      const int64_t u = blk * 8 + p;
      std::memcpy(b + 48 + 16 * p, row + 16 * u, 16);
      uint32_t w;
      std::memcpy(&w, row + qh_offset(g) + 4 * u, 4);
      unpack_qh_word(w, p / 2, b + 16 + 16 * (p % 2));
    }
    KQuantHead::unpack(row + g.head_offset + blk * kHeadBytes, b);
  }
  POLYKV_HD static void load(const uint8_t* row, const SplitGeom& g, int64_t u, uint32_t (&q)[kUnitWords],
                             uint32_t (&h)[kHeadWords]) {
    ld_stream_16B(row + 16 * u, q);
    q[4] = ld_stream_u32(row + qh_offset(g) + 4 * u);
    ld_stream_16B(row + g.head_offset + (u / 8) * kHeadBytes, h);
  }
  // The same words and fields as DecQ5_K::load.
  POLYKV_HD static void decode(const uint32_t (&q)[kUnitWords], const uint32_t (&h)[kHeadWords], int part,
                               DecQ5_K::Unit& u) {
    const uint32_t l[4] = {q[0], q[1], q[2], q[3]};
    split_nibbles(l, u);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      u.q[k] |= ((q[4] >> k) & 0x01010101u) << 4;
      u.q[4 + k] |= ((q[4] >> (4 + k)) & 0x01010101u) << 4;
    }
    KQuantHead::decode_scales(h, part, u);
  }
};

// q6_K: ql[128], qh[64], scales[16] (int8), d (f16). Unit p = 4 hh + 2 m + t (matmul_cuda_decode.cuh)
// reads ql[16 p .. 16 p + 16), two bits (2m, 2m+1 and 2m+4, 2m+5) of each byte of the 16-byte qh chunk
// 32 hh + 16 t (shared with the unit of the other m), scales 8 hh + 2 m + t and 8 hh + 2 m + 4 + t,
// and d. Split row: [ql: 16 per unit][qh: 8 per unit][scale pair: 2 per unit][d: 2 per block]: a
// unit's qh bits are repacked into two words, word 0 holding the low-run bits (2m, 2m+1) of qh word k
// at bits 2k, 2k+1 of each byte, word 1 the high-run bits likewise; every byte of the block is used
// once (210 bytes per block, as ggml's).
template <>
struct Split<DecQ6_K> {
  static constexpr int kUnitBytes = 16 + 8 + 2, kHeadBytes = 2;
  static constexpr int kUnitWords = 4 + 2 + 1, kHeadWords = 1;
  static constexpr int kLoadsPerUnit = 2;
  static_assert(kHeadBytes + DecQ6_K::kParts * kUnitBytes == DecQ6_K::kBlockBytes, "a block keeps its bytes");
  POLYKV_HD static int64_t qh_offset(const SplitGeom& g) { return 16 * g.n_units; }
  POLYKV_HD static int64_t sc_offset(const SplitGeom& g) { return 24 * g.n_units; }
  static void pack(const uint8_t* b, uint8_t* row, const SplitGeom& g, int64_t blk) {
    for (int p = 0; p < 8; ++p) {
      const int hh = p / 4, m = (p / 2) % 2, t = p % 2;
      const int64_t u = blk * 8 + p;
      std::memcpy(row + 16 * u, b + 16 * p, 16);
      uint32_t w[2] = {0, 0};
      for (int k = 0; k < 4; ++k) {
        const uint32_t hv = host_word(b + 128 + 32 * hh + 16 * t + 4 * k);
        w[0] |= ((hv >> (2 * m)) & 0x03030303u) << (2 * k);
        w[1] |= ((hv >> (2 * m + 4)) & 0x03030303u) << (2 * k);
      }
      std::memcpy(row + qh_offset(g) + 8 * u, w, 8);
      row[sc_offset(g) + 2 * u] = b[192 + 8 * hh + 2 * m + t];
      row[sc_offset(g) + 2 * u + 1] = b[192 + 8 * hh + 2 * m + 4 + t];
    }
    std::memcpy(row + g.head_offset + 2 * blk, b + 208, 2);
  }
  static void unpack(const uint8_t* row, const SplitGeom& g, int64_t blk, uint8_t* b) {
    std::memset(b + 128, 0, 64);
    for (int p = 0; p < 8; ++p) {
      const int hh = p / 4, m = (p / 2) % 2, t = p % 2;
      const int64_t u = blk * 8 + p;
      std::memcpy(b + 16 * p, row + 16 * u, 16);
      const uint32_t w0 = host_word(row + qh_offset(g) + 8 * u), w1 = host_word(row + qh_offset(g) + 8 * u + 4);
      for (int k = 0; k < 4; ++k) {
        uint8_t* dst = b + 128 + 32 * hh + 16 * t + 4 * k;
        uint32_t hv = host_word(dst);
        hv |= ((w0 >> (2 * k)) & 0x03030303u) << (2 * m);
        hv |= ((w1 >> (2 * k)) & 0x03030303u) << (2 * m + 4);
        std::memcpy(dst, &hv, 4);
      }
      b[192 + 8 * hh + 2 * m + t] = row[sc_offset(g) + 2 * u];
      b[192 + 8 * hh + 2 * m + 4 + t] = row[sc_offset(g) + 2 * u + 1];
    }
    std::memcpy(b + 208, row + g.head_offset + 2 * blk, 2);
  }
  POLYKV_HD static void load(const uint8_t* row, const SplitGeom& g, int64_t u, uint32_t (&q)[kUnitWords],
                             uint32_t (&h)[kHeadWords]) {
    ld_stream_16B(row + 16 * u, q);
    ld_stream_8B(row + qh_offset(g) + 8 * u, q + 4);
    q[6] = ld_stream_u16(row + sc_offset(g) + 2 * u);
    h[0] = ld_stream_u16(row + g.head_offset + 2 * (u / 8));
  }
  // The same operations as DecQ6_K::load.
  POLYKV_HD static void decode(const uint32_t (&q)[kUnitWords], const uint32_t (&h)[kHeadWords], int /*part*/,
                               DecQ6_K::Unit& u) {
    const uint32_t l[4] = {q[0], q[1], q[2], q[3]};
    split_nibbles(l, u);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      u.q[k] |= ((q[4] >> (2 * k)) & 0x03030303u) << 4;
      u.q[4 + k] |= ((q[5] >> (2 * k)) & 0x03030303u) << 4;
    }
    const float d = half_to_f32(uint16_t(h[0]));
    const int8_t s0 = int8_t(q[6] & 0xFF);
    const int8_t s1 = int8_t((q[6] >> 8) & 0xFF);
    u.scale[0] = fmul(d, float(s0));
    u.scale[1] = fmul(d, float(s1));
    u.min[0] = fmul(-32.0f, u.scale[0]);
    u.min[1] = fmul(-32.0f, u.scale[1]);
  }
};

// Whether type t has a split layout.
inline bool has_split(DType t) {
  return t == DType::Q4_0 || t == DType::Q8_0 || t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K;
}

// Calls fn(Dec{}) for a type with a split layout and returns true; false for others.
template <class Fn>
bool visit_split_decoder(DType t, Fn&& fn) {
  switch (t) {
    case DType::Q4_0: fn(DecQ4_0{}); return true;
    case DType::Q8_0: fn(DecQ8_0{}); return true;
    case DType::Q4_K: fn(DecQ4_K{}); return true;
    case DType::Q5_K: fn(DecQ5_K{}); return true;
    case DType::Q6_K: fn(DecQ6_K{}); return true;
    default: return false;
  }
}

template <class T>
POLYKV_HD SplitGeom split_geom(int64_t n_in) {
  SplitGeom g;
  const int64_t n_blocks = n_in / T::kBlockValues;
  g.n_units = n_blocks * T::kParts;
  g.head_offset = g.n_units * Split<T>::kUnitBytes;
  g.row_bytes = size_t((g.head_offset + n_blocks * Split<T>::kHeadBytes + 15) / 16 * 16);
  return g;
}

// Rows of ggml blocks (src, src_stride apart) -> split rows (dst, split_geom().row_bytes apart), padding
// zeroed. Host code (the backend repacks at upload).
template <class T>
void split_pack_rows(const uint8_t* src, size_t src_stride, int64_t n_in, int64_t rows, uint8_t* dst) {
  const SplitGeom g = split_geom<T>(n_in);
  const int64_t n_blocks = n_in / T::kBlockValues;
  for (int64_t o = 0; o < rows; ++o) {
    const uint8_t* s = src + size_t(o) * src_stride;
    uint8_t* d = dst + size_t(o) * g.row_bytes;
    std::memset(d, 0, g.row_bytes);
    for (int64_t b = 0; b < n_blocks; ++b) Split<T>::pack(s + b * T::kBlockBytes, d, g, b);
  }
}

// The inverse (tests): split rows -> ggml rows, dst_stride apart.
template <class T>
void split_unpack_rows(const uint8_t* src, int64_t n_in, int64_t rows, uint8_t* dst, size_t dst_stride) {
  const SplitGeom g = split_geom<T>(n_in);
  const int64_t n_blocks = n_in / T::kBlockValues;
  for (int64_t o = 0; o < rows; ++o)
    for (int64_t b = 0; b < n_blocks; ++b)
      Split<T>::unpack(src + size_t(o) * g.row_bytes, g, b, dst + size_t(o) * dst_stride + b * T::kBlockBytes);
}

// Unit u of a split row starting at `row`: its quant words and its block's head words.
template <class T>
POLYKV_HD void split_load_unit(const uint8_t* row, const SplitGeom& g, int64_t u, uint32_t (&q)[Split<T>::kUnitWords],
                               uint32_t (&h)[Split<T>::kHeadWords]) {
  Split<T>::load(row, g, u, q, h);
}

// One chunk of a split mat-vec's loop (matvec_split_kernel, the MoE v2 mat-vecs): lane `lane`'s units
// u = 32 (j0 + k) + lane, k < U, of the R rows (rows r >= nrows and units past the row: zeros).
template <class T, int R, int U>
POLYKV_HD void split_load_chunk(const uint8_t* const (&rows)[R], const SplitGeom& g, int64_t j0, int lane, int nrows,
                                uint32_t (&q)[U][R][Split<T>::kUnitWords], uint32_t (&h)[U][R][Split<T>::kHeadWords]) {
#pragma unroll
  for (int k = 0; k < U; ++k) {
    const int64_t u = 32 * (j0 + k) + lane;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (u < g.n_units && r < nrows) {
        split_load_unit<T>(rows[r], g, u, q[k][r], h[k][r]);
      } else {
#pragma unroll
        for (int i = 0; i < Split<T>::kUnitWords; ++i) q[k][r][i] = 0;
#pragma unroll
        for (int i = 0; i < Split<T>::kHeadWords; ++i) h[k][r][i] = 0;
      }
    }
  }
}

}  // namespace polykv::cuda::hd
