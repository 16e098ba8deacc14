// Decode of every weight type's blocks for the CUDA matmul (host and device, see matmul_cuda_hd.cuh),
// tested on the CPU against quant/dequantize_ref.cpp by tests/cuda_quant_decode_test.cpp.
//
// Quantized types. A block (32 or 256 values, ggml layout, quant/blocks.h) is cut into kParts
// "units", each decoded by one GPU lane. A unit holds kRuns runs of 16 consecutive values of the block
// (run r starts at value run_pos(part, r), a multiple of 16), as signed 8-bit quants packed 4 per
// word: word 4r + k holds values run_pos + 4k .. + 3, byte j being value run_pos + 4k + j. The runs
// are split into kGroups groups of equal size (16 or 32 values, inside one 32-value activation block);
// every value of group g is
//     value = scale[g] * q + min[g]            (one rounding: scale * q is exact in f32)
// which is dequantize_row_ref's value bit for bit (checked by the tests; only a zero may get the other
// sign, e.g. d * q - 8 * d is +0 where ggml's d * (q - 8) is -0 for d < 0): the scales are f16
// times small integers (<= 18 significant bits) and q has <= 6 bits, so every product is exact, and
// ggml's "d * (q - 8)" equals "d * q - 8 * d" exactly.
//
// Units of one block (part = 0 .. kParts-1), per type:
//   q4_0 q4_1 q5_0 q5_1 q8_0  one unit = the block: runs at 0 and 16; one group of 32.
//   q4_K q5_K  part = 2j + h: 16 bytes of qs, runs at 64j + 16h (low nibbles, sub-block 2j) and
//              64j + 32 + 16h (high nibbles, sub-block 2j + 1); a group per run (16 values).
//   q6_K       part = 4hh + 2m + t: runs at 128hh + 32m + 16t (ql low nibbles) and 128hh + 64 + 32m
//              + 16t (high nibbles); a group per run.
//   q2_K q3_K  part = 2h + t: 16 bytes of qs, runs at 128h + 32j + 16t (bits 2j..2j+1), j = 0..3; a
//              group per run (the 16-value sub-block 8h + 2j + t).
// Every value of a block is in exactly one unit (tested).
//
// Template parameter A of load(): the alignment the block's first byte is known to have (2 at
// least; at most kMaxAlign, the largest power of two dividing the block size, <= 16). Fields are
// read with the widest accesses A allows.
#pragma once
#include <cstdint>

#include "backend/cuda/matmul_cuda_hd.cuh"
#include "core/dtype.h"

namespace polykv::cuda::hd {

template <int Runs, int Groups>
struct QUnit {
  static constexpr int kWords = 4 * Runs;
  static constexpr int kGroupCount = Groups;
  uint32_t q[kWords];  // signed 8-bit quants, 4 per word (see above)
  float scale[Groups];
  float min[Groups];
};

// The `value = scale * q + min` of word w, byte j of a unit.
template <class U>
POLYKV_HD float unit_value(const U& u, int w, int j) {
  const int g = w / (U::kWords / U::kGroupCount);
  return fma(u.scale[g], float(byte_s8(u.q[w], j)), u.min[g]);
}

// Low nibbles (mask 0x0F) etc. of four packed bytes.
constexpr uint32_t kNib = 0x0F0F0F0Fu;

// The low 4 bits of b spread to bit 4 of each byte: bit k of b -> bit 8k + 4.
POLYKV_HD uint32_t spread4_to_bit4(uint32_t b) { return (((b & 0xFu) * 0x00204081u) & 0x01010101u) << 4; }

// q4_K / q5_K packed 6-bit scale and min of sub-block j (0..7) from the 12 bytes s[0..11] (the
// rule of quant/kquant_scales.h, kquant_scale_min, on bytes held in three words).
// (Selects rather than s[i / 4]: a run-time index would put s in local memory.)
POLYKV_HD uint32_t scale_byte(const uint32_t s[3], int i) {
  const uint32_t w = i < 4 ? s[0] : i < 8 ? s[1] : s[2];
  return (w >> (8 * (i % 4))) & 0xFF;
}

POLYKV_HD void kquant_scale_min_hd(int j, const uint32_t s[3], int& scale, int& min) {
  if (j < 4) {
    scale = int(scale_byte(s, j) & 63);
    min = int(scale_byte(s, j + 4) & 63);
  } else {
    scale = int((scale_byte(s, j + 4) & 0x0F) | ((scale_byte(s, j - 4) >> 6) << 4));
    min = int((scale_byte(s, j + 4) >> 4) | ((scale_byte(s, j) >> 6) << 4));
  }
}

// q3_K signed 6-bit scale of sub-block j (0..15) from the 12 bytes s[0..11] (quant/kquant_scales.h,
// q3k_scale).
POLYKV_HD int q3k_scale_hd(int j, const uint32_t s[3]) {
  const int low = j < 8 ? int(scale_byte(s, j) & 0x0F) : int(scale_byte(s, j - 8) >> 4);
  const int high = int((scale_byte(s, 8 + j % 4) >> (2 * (j / 4))) & 3);
  return (low | (high << 4)) - 32;
}

// Legacy 32-value blocks: nibble words v[0..3] (bytes qs[0..15]) -> low nibbles are values 0..15,
// high nibbles values 16..31.
template <class U>
POLYKV_HD void split_nibbles(const uint32_t v[4], U& u) {
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    u.q[k] = v[k] & kNib;
    u.q[4 + k] = (v[k] >> 4) & kNib;
  }
}

struct DecQ4_0 {  // d (f16), qs[16]; x = d * (q - 8)
  static constexpr int kBlockValues = 32, kBlockBytes = 18, kParts = 1, kRuns = 2, kGroups = 1, kMaxAlign = 2;
  static constexpr bool kHasMin = true;
  using Unit = QUnit<kRuns, kGroups>;
  POLYKV_HD static int run_pos(int /*part*/, int r) { return 16 * r; }
  template <int A>
  POLYKV_HD static void load(const uint8_t* b, int /*part*/, Unit& u) {
    uint32_t v[4];
    ld_16B<field_align(A, 2)>(b + 2, v);
    split_nibbles(v, u);
    const float d = half_to_f32(uint16_t(ld_u16(b)));
    u.scale[0] = d;
    u.min[0] = fmul(-8.0f, d);
  }
};

struct DecQ4_1 {  // d, m (f16), qs[16]; x = d * q + m
  static constexpr int kBlockValues = 32, kBlockBytes = 20, kParts = 1, kRuns = 2, kGroups = 1, kMaxAlign = 4;
  static constexpr bool kHasMin = true;
  using Unit = QUnit<kRuns, kGroups>;
  POLYKV_HD static int run_pos(int /*part*/, int r) { return 16 * r; }
  template <int A>
  POLYKV_HD static void load(const uint8_t* b, int /*part*/, Unit& u) {
    uint32_t v[4];
    ld_16B<field_align(A, 4)>(b + 4, v);
    split_nibbles(v, u);
    const uint32_t dm = ld_u32<A>(b);
    u.scale[0] = half_to_f32(uint16_t(dm & 0xFFFF));
    u.min[0] = half_to_f32(uint16_t(dm >> 16));
  }
};

// q5: fifth bit of value i is bit i of the little-endian 32-bit qh.
template <class U>
POLYKV_HD void add_q5_high_bits(uint32_t qh, U& u) {
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    u.q[k] |= spread4_to_bit4(qh >> (4 * k));
    u.q[4 + k] |= spread4_to_bit4(qh >> (16 + 4 * k));
  }
}

struct DecQ5_0 {  // d (f16), qh[4], qs[16]; x = d * (q - 16)
  static constexpr int kBlockValues = 32, kBlockBytes = 22, kParts = 1, kRuns = 2, kGroups = 1, kMaxAlign = 2;
  static constexpr bool kHasMin = true;
  using Unit = QUnit<kRuns, kGroups>;
  POLYKV_HD static int run_pos(int /*part*/, int r) { return 16 * r; }
  template <int A>
  POLYKV_HD static void load(const uint8_t* b, int /*part*/, Unit& u) {
    uint32_t v[4];
    ld_16B<field_align(A, 6)>(b + 6, v);
    split_nibbles(v, u);
    add_q5_high_bits(ld_u32<field_align(A, 2)>(b + 2), u);
    const float d = half_to_f32(uint16_t(ld_u16(b)));
    u.scale[0] = d;
    u.min[0] = fmul(-16.0f, d);
  }
};

struct DecQ5_1 {  // d, m (f16), qh[4], qs[16]; x = d * q + m
  static constexpr int kBlockValues = 32, kBlockBytes = 24, kParts = 1, kRuns = 2, kGroups = 1, kMaxAlign = 8;
  static constexpr bool kHasMin = true;
  using Unit = QUnit<kRuns, kGroups>;
  POLYKV_HD static int run_pos(int /*part*/, int r) { return 16 * r; }
  template <int A>
  POLYKV_HD static void load(const uint8_t* b, int /*part*/, Unit& u) {
    uint32_t v[4];
    ld_16B<field_align(A, 8)>(b + 8, v);
    split_nibbles(v, u);
    add_q5_high_bits(ld_u32<field_align(A, 4)>(b + 4), u);
    const uint32_t dm = ld_u32<field_align(A, 0)>(b);
    u.scale[0] = half_to_f32(uint16_t(dm & 0xFFFF));
    u.min[0] = half_to_f32(uint16_t(dm >> 16));
  }
};

struct DecQ8_0 {  // d (f16), qs[32] (int8); x = d * q
  static constexpr int kBlockValues = 32, kBlockBytes = 34, kParts = 1, kRuns = 2, kGroups = 1, kMaxAlign = 2;
  static constexpr bool kHasMin = false;
  using Unit = QUnit<kRuns, kGroups>;
  POLYKV_HD static int run_pos(int /*part*/, int r) { return 16 * r; }
  template <int A>
  POLYKV_HD static void load(const uint8_t* b, int /*part*/, Unit& u) {
    ld_16B<field_align(A, 2)>(b + 2, u.q);
    ld_16B<field_align(A, 18)>(b + 18, u.q + 4);
    u.scale[0] = half_to_f32(uint16_t(ld_u16(b)));
    u.min[0] = 0.0f;
  }
};

struct DecQ2_K {  // scales[16], qs[64], d, dmin (f16); x = d * (sc & 15) * q - dmin * (sc >> 4)
  static constexpr int kBlockValues = 256, kBlockBytes = 84, kParts = 4, kRuns = 4, kGroups = 4, kMaxAlign = 4;
  static constexpr bool kHasMin = true;
  using Unit = QUnit<kRuns, kGroups>;
  POLYKV_HD static int run_pos(int part, int r) { return 128 * (part / 2) + 32 * r + 16 * (part % 2); }
  template <int A>
  POLYKV_HD static void load(const uint8_t* b, int part, Unit& u) {
    const int h = part / 2, t = part % 2;
    uint32_t v[4];
    ld_16B<field_align(A, 16)>(b + 16 + 32 * h + 16 * t, v);
    const uint32_t dd = ld_u32<field_align(A, 80)>(b + 80);
    const float d = half_to_f32(uint16_t(dd & 0xFFFF)), dmin = half_to_f32(uint16_t(dd >> 16));
#pragma unroll
    for (int j = 0; j < 4; ++j) {
#pragma unroll
      for (int k = 0; k < 4; ++k) u.q[4 * j + k] = (v[k] >> (2 * j)) & 0x03030303u;
      const uint32_t sc = ld_u8(b + 8 * h + 2 * j + t);
      u.scale[j] = fmul(d, float(sc & 0xF));
      u.min[j] = -fmul(dmin, float(sc >> 4));
    }
  }
};

struct DecQ3_K {  // hmask[32], qs[64], scales[12], d (f16); x = d * scale * (q - 4 + 4 * hbit)
  static constexpr int kBlockValues = 256, kBlockBytes = 110, kParts = 4, kRuns = 4, kGroups = 4, kMaxAlign = 2;
  static constexpr bool kHasMin = true;
  using Unit = QUnit<kRuns, kGroups>;
  POLYKV_HD static int run_pos(int part, int r) { return 128 * (part / 2) + 32 * r + 16 * (part % 2); }
  template <int A>
  POLYKV_HD static void load(const uint8_t* b, int part, Unit& u) {
    const int h = part / 2, t = part % 2;
    uint32_t v[4], hm[4], s[3];
    ld_16B<field_align(A, 32)>(b + 32 + 32 * h + 16 * t, v);
    ld_16B<field_align(A, 0)>(b + 16 * t, hm);
#pragma unroll
    for (int i = 0; i < 3; ++i) s[i] = ld_u32<field_align(A, 96)>(b + 96 + 4 * i);
    const float d = half_to_f32(uint16_t(ld_u16(b + 108)));
#pragma unroll
    for (int j = 0; j < 4; ++j) {
#pragma unroll
      for (int k = 0; k < 4; ++k)
        u.q[4 * j + k] = ((v[k] >> (2 * j)) & 0x03030303u) | (((hm[k] >> (4 * h + j)) & 0x01010101u) << 2);
      u.scale[j] = fmul(d, float(q3k_scale_hd(8 * h + 2 * j + t, s)));
      u.min[j] = fmul(-4.0f, u.scale[j]);
    }
  }
};

// q4_K / q5_K: d, dmin (f16), 12 bytes of packed scales, the same for both.
// From the header's four little-endian words (the split layout loads them itself).
template <class U>
POLYKV_HD void kquant_45_scales_words(const uint32_t (&hdr)[4], int j, U& u) {
  const uint32_t dd = hdr[0];
  const float d = half_to_f32(uint16_t(dd & 0xFFFF)), dmin = half_to_f32(uint16_t(dd >> 16));
  const uint32_t s[3] = {hdr[1], hdr[2], hdr[3]};
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    int sc, m;
    kquant_scale_min_hd(2 * j + r, s, sc, m);
    u.scale[r] = fmul(d, float(sc));
    u.min[r] = -fmul(dmin, float(m));
  }
}

// The 16 header bytes (d, dmin, scales) in one load where the block is 16-byte aligned.
template <int A, class U>
POLYKV_HD void kquant_45_scales(const uint8_t* b, int j, U& u) {
  uint32_t hdr[4];
  ld_16B<A>(b, hdr);
  kquant_45_scales_words(hdr, j, u);
}

struct DecQ4_K {  // d, dmin, scales[12], qs[128]; x = d * sc * q - dmin * m per 32-value sub-block
  static constexpr int kBlockValues = 256, kBlockBytes = 144, kParts = 8, kRuns = 2, kGroups = 2, kMaxAlign = 16;
  static constexpr bool kHasMin = true;
  using Unit = QUnit<kRuns, kGroups>;
  POLYKV_HD static int run_pos(int part, int r) { return 64 * (part / 2) + 32 * r + 16 * (part % 2); }
  template <int A>
  POLYKV_HD static void load(const uint8_t* b, int part, Unit& u) {
    const int j = part / 2, h = part % 2;
    uint32_t v[4];
    ld_16B<field_align(A, 16)>(b + 16 + 32 * j + 16 * h, v);
    split_nibbles(v, u);
    kquant_45_scales<A>(b, j, u);
  }
};

struct DecQ5_K {  // d, dmin, scales[12], qh[32], qs[128]; fifth bit of value 32s + k is bit s of qh[k]
  static constexpr int kBlockValues = 256, kBlockBytes = 176, kParts = 8, kRuns = 2, kGroups = 2, kMaxAlign = 16;
  static constexpr bool kHasMin = true;
  using Unit = QUnit<kRuns, kGroups>;
  POLYKV_HD static int run_pos(int part, int r) { return 64 * (part / 2) + 32 * r + 16 * (part % 2); }
  template <int A>
  POLYKV_HD static void load(const uint8_t* b, int part, Unit& u) {
    const int j = part / 2, h = part % 2;
    uint32_t v[4], hv[4];
    ld_16B<field_align(A, 48)>(b + 48 + 32 * j + 16 * h, v);
    ld_16B<field_align(A, 16)>(b + 16 + 16 * h, hv);
    split_nibbles(v, u);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      u.q[k] |= ((hv[k] >> (2 * j)) & 0x01010101u) << 4;
      u.q[4 + k] |= ((hv[k] >> (2 * j + 1)) & 0x01010101u) << 4;
    }
    kquant_45_scales<A>(b, j, u);
  }
};

struct DecQ6_K {  // ql[128], qh[64], scales[16] (int8), d (f16); x = d * sc * (q - 32)
  static constexpr int kBlockValues = 256, kBlockBytes = 210, kParts = 8, kRuns = 2, kGroups = 2, kMaxAlign = 2;
  static constexpr bool kHasMin = true;
  using Unit = QUnit<kRuns, kGroups>;
  POLYKV_HD static int run_pos(int part, int r) {
    return 128 * (part / 4) + 64 * r + 32 * ((part / 2) % 2) + 16 * (part % 2);
  }
  template <int A>
  POLYKV_HD static void load(const uint8_t* b, int part, Unit& u) {
    const int hh = part / 4, m = (part / 2) % 2, t = part % 2;
    uint32_t l[4], hv[4];
    ld_16B<field_align(A, 0)>(b + 64 * hh + 32 * m + 16 * t, l);
    ld_16B<field_align(A, 128)>(b + 128 + 32 * hh + 16 * t, hv);
    split_nibbles(l, u);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      u.q[k] |= ((hv[k] >> (2 * m)) & 0x03030303u) << 4;
      u.q[4 + k] |= ((hv[k] >> (2 * m + 4)) & 0x03030303u) << 4;
    }
    const float d = half_to_f32(uint16_t(ld_u16(b + 208)));
    const int8_t s0 = int8_t(ld_u8(b + 192 + 8 * hh + 2 * m + t));
    const int8_t s1 = int8_t(ld_u8(b + 192 + 8 * hh + 2 * m + 4 + t));
    u.scale[0] = fmul(d, float(s0));
    u.scale[1] = fmul(d, float(s1));
    u.min[0] = fmul(-32.0f, u.scale[0]);
    u.min[1] = fmul(-32.0f, u.scale[1]);
  }
};

// MXFP4 (quant/mxfp4.h): e (E8M0), qs[16]; value j = kMxfp4Values[low nibble of qs[j]] * 2^(e - 128),
// value j + 16 the high nibble's (q4_0's order). One unit = the block: runs at 0 and 16, one group of
// 32 with scale 2^(e - 128) (exact; e = 0, 1 subnormal) and no min; the quants are the doubled E2M1
// values as signed bytes (|k| <= 12), so dp4a multiplies them exactly.
// Blocks are 17 bytes, so a block may start at any byte: load() reads the exponent byte and the 16
// bytes of qs as aligned 4-byte words joined by funnel shifts (whatever A says). It reads the
// aligned words holding qs's bytes, i.e. up to 3 bytes past the block (never past the aligned word
// of its last byte); CUDA uploads of mxfp4 rows keep 16 bytes of slack after the last row for that.
POLYKV_HD float mxfp4_scale_hd(uint32_t e) {
  return bits_to_f32(e >= 2 ? (e - 1) << 23 : 0x00200000u << e);  // 2^-128 = 2^21 * 2^-149
}

// Four nibbles (the low 4 bits of each byte of v, upper bits zero) to the signed bytes
// kMxfp4Values[nibble]: magnitude {0, 1, 2, 3, 4, 6, 8, 12}[n & 7], negated when n & 8.
POLYKV_HD uint32_t mxfp4_nibbles_to_s8(uint32_t v) {
#ifdef __CUDA_ARCH__
  const uint32_t sel = (v & 0x7u) | ((v >> 4) & 0x70u) | ((v >> 8) & 0x700u) | ((v >> 12) & 0x7000u);
  const uint32_t mag = __byte_perm(0x03020100u, 0x0C080604u, sel);
  const uint32_t neg = ((v >> 3) & 0x01010101u) * 0xFFu;  // 0xFF in the bytes to negate
  return (mag & ~neg) | (__vneg4(mag) & neg);
#else
  constexpr uint8_t kMag[8] = {0, 1, 2, 3, 4, 6, 8, 12};
  uint32_t out = 0;
  for (int k = 0; k < 4; ++k) {
    const uint32_t n = (v >> (8 * k)) & 0xFu;
    const uint8_t m = kMag[n & 7];
    const uint8_t b = (n & 8) ? uint8_t(-int(m)) : m;
    out |= uint32_t(b) << (8 * k);
  }
  return out;
#endif
}

// N little-endian words of the bytes at p (any alignment): aligned word loads joined by funnel shifts.
template <int N>
POLYKV_HD void ld_words_any(const uint8_t* p, uint32_t* out) {
  const uintptr_t mis = reinterpret_cast<uintptr_t>(p) & 3u;
  const uint8_t* a = p - mis;
  const uint32_t sh = uint32_t(mis) * 8u;
  uint32_t w[N + 1];
#pragma unroll
  for (int k = 0; k < N; ++k) w[k] = ld_word(a + 4 * k);
  w[N] = mis ? ld_word(a + 4 * N) : w[N - 1];  // the word past the field only when the field reaches it
#pragma unroll
  for (int k = 0; k < N; ++k) out[k] = funnel_r(w[k], w[k + 1], sh);
}

struct DecMXFP4 {
  static constexpr int kBlockValues = 32, kBlockBytes = 17, kParts = 1, kRuns = 2, kGroups = 1, kMaxAlign = 1;
  static constexpr bool kHasMin = false;
  using Unit = QUnit<kRuns, kGroups>;
  POLYKV_HD static int run_pos(int /*part*/, int r) { return 16 * r; }
  template <int A>
  POLYKV_HD static void load(const uint8_t* b, int /*part*/, Unit& u) {
    uint32_t v[4];
    ld_words_any<4>(b + 1, v);  // qs[4k .. 4k + 3] in v[k]
    const uint32_t e = ld_u8(b);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      u.q[k] = mxfp4_nibbles_to_s8(v[k] & kNib);
      u.q[4 + k] = mxfp4_nibbles_to_s8((v[k] >> 4) & kNib);
    }
    u.scale[0] = mxfp4_scale_hd(e);
    u.min[0] = 0.0f;
  }
};

// Ternary types (quant/ternary.h; values t = code - 1, x = d * t): x = d * code - d, codes as q (0..2; TQ2_0 0..3),
// one group per run with scale d and min -d (exact: d * code is exact and so is its difference with d).
// Base-3 bytes (TQ1_0, PTQ1_0): digit n of byte b is ((b * 3^n mod 256) * 3) >> 8 (quant/ternary.h base3_digit).
POLYKV_HD uint32_t base3_digits4(uint32_t w, uint32_t pow3) {  // digit of each of the 4 bytes of w
  uint32_t out = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) out |= ((((((w >> (8 * j)) & 0xFFu) * pow3) & 0xFFu) * 3u) >> 8) << (8 * j);
  return out;
}
template <class U>
POLYKV_HD void ternary_scales(float d, U& u) {
#pragma unroll
  for (int g = 0; g < U::kGroupCount; ++g) u.scale[g] = d, u.min[g] = -d;
}

struct DecTQ2_0 {  // qs[64], d (f16); value 128c + 32k + m: (qs[32c + m] >> 2k) & 3, minus 1
  static constexpr int kBlockValues = 256, kBlockBytes = 66, kParts = 4, kRuns = 4, kGroups = 4, kMaxAlign = 2;
  static constexpr bool kHasMin = true;
  using Unit = QUnit<kRuns, kGroups>;
  // part = 2c + h: 16 bytes qs[32c + 16h ..], runs at 128c + 32k + 16h (bits 2k..2k+1), as q2_K's qs.
  POLYKV_HD static int run_pos(int part, int r) { return 128 * (part / 2) + 32 * r + 16 * (part % 2); }
  template <int A>
  POLYKV_HD static void load(const uint8_t* b, int part, Unit& u) {
    const int off = 32 * (part / 2) + 16 * (part % 2);
    uint32_t v[4];
    if (off == 0) ld_16B<field_align(A, 0)>(b, v);
    else if (off == 16) ld_16B<field_align(A, 16)>(b + 16, v);
    else if (off == 32) ld_16B<field_align(A, 32)>(b + 32, v);
    else ld_16B<field_align(A, 48)>(b + 48, v);
#pragma unroll
    for (int k = 0; k < 4; ++k)
#pragma unroll
      for (int w = 0; w < 4; ++w) u.q[4 * k + w] = (v[w] >> (2 * k)) & 0x03030303u;
    ternary_scales(half_to_f32(uint16_t(ld_u16(b + 64))), u);
  }
};

// TQ1_0: qs[48], qh[4], d (f16). Values 32n + m: digit n of qs[m] (m < 32); 160 + 16n + m: digit n of
// qs[32 + m]; 240 + 4n + h: digit n < 4 of qh[h]. Parts: 0 and 1 digits 0..3 of qs[0..15] / qs[16..31]
// (runs at 32r, 32r + 16); 2: digit 4 of qs[0..15] and qs[16..31], digits 0, 1 of qs[32..47] (runs at 128 +
// 16r); 3: digits 2, 3, 4 of qs[32..47] and qh (runs at 192 + 16r).
struct DecTQ1_0 {
  static constexpr int kBlockValues = 256, kBlockBytes = 54, kParts = 4, kRuns = 4, kGroups = 4, kMaxAlign = 2;
  static constexpr bool kHasMin = true;
  using Unit = QUnit<kRuns, kGroups>;
  POLYKV_HD static int run_pos(int part, int r) { return part < 2 ? 32 * r + 16 * part : 128 + 64 * (part - 2) + 16 * r; }
  template <int A>
  POLYKV_HD static void load(const uint8_t* b, int part, Unit& u) {
    constexpr uint32_t kPow3[5] = {1, 3, 9, 27, 81};
    uint32_t v[4];
    if (part == 0 || part == 1) {
      if (part == 0) ld_16B<field_align(A, 0)>(b, v);
      else ld_16B<field_align(A, 16)>(b + 16, v);
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int k = 0; k < 4; ++k) u.q[4 * r + k] = base3_digits4(v[k], kPow3[r]);
    } else if (part == 2) {
      uint32_t a[4], c[4];
      ld_16B<field_align(A, 0)>(b, a);
      ld_16B<field_align(A, 16)>(b + 16, c);
      ld_16B<field_align(A, 32)>(b + 32, v);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        u.q[k] = base3_digits4(a[k], 81);
        u.q[4 + k] = base3_digits4(c[k], 81);
        u.q[8 + k] = base3_digits4(v[k], 1);
        u.q[12 + k] = base3_digits4(v[k], 3);
      }
    } else {
      ld_16B<field_align(A, 32)>(b + 32, v);
      const uint32_t h = ld_u32<field_align(A, 48)>(b + 48);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        u.q[k] = base3_digits4(v[k], 9);
        u.q[4 + k] = base3_digits4(v[k], 27);
        u.q[8 + k] = base3_digits4(v[k], 81);
        u.q[12 + k] = base3_digits4(h, kPow3[k]);  // values 240 + 4k + j: digit k of qh[j]
      }
    }
    ternary_scales(half_to_f32(uint16_t(ld_u16(b + 52))), u);
  }
};

// PTQ1_0: qs[24], qh[2], d (f16), 128 values. 16n + m: digit n of qs[m] (m < 16); 80 + 8n + m: digit n of
// qs[16 + m]; 120 + 2n + h: digit n < 4 of qh[h]. Part 0: digits 0..3 of qs[0..15] (runs at 16r); part 1:
// digit 4 of qs[0..15], then qs[16..23] and qh (runs at 64 + 16r).
struct DecPTQ1_0 {
  static constexpr int kBlockValues = 128, kBlockBytes = 28, kParts = 2, kRuns = 4, kGroups = 4, kMaxAlign = 4;
  static constexpr bool kHasMin = true;
  using Unit = QUnit<kRuns, kGroups>;
  POLYKV_HD static int run_pos(int part, int r) { return 64 * part + 16 * r; }
  template <int A>
  POLYKV_HD static void load(const uint8_t* b, int part, Unit& u) {
    constexpr uint32_t kPow3[5] = {1, 3, 9, 27, 81};
    uint32_t v[4];
    ld_16B<field_align(A, 0)>(b, v);
    if (part == 0) {
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int k = 0; k < 4; ++k) u.q[4 * r + k] = base3_digits4(v[k], kPow3[r]);
    } else {
      const uint32_t s0 = ld_u32<field_align(A, 16)>(b + 16), s1 = ld_u32<field_align(A, 20)>(b + 20);
      const uint32_t h = ld_u16(b + 24);  // qh[0] | qh[1] << 8
#pragma unroll
      for (int k = 0; k < 4; ++k) u.q[k] = base3_digits4(v[k], 81);
#pragma unroll
      for (int r = 1; r < 3; ++r) {  // values 80 + 16(r-1) + 8t + 4w + j: digit 2(r-1) + t of qs[16 + 4w + j]
        u.q[4 * r + 0] = base3_digits4(s0, kPow3[2 * (r - 1)]);
        u.q[4 * r + 1] = base3_digits4(s1, kPow3[2 * (r - 1)]);
        u.q[4 * r + 2] = base3_digits4(s0, kPow3[2 * (r - 1) + 1]);
        u.q[4 * r + 3] = base3_digits4(s1, kPow3[2 * (r - 1) + 1]);
      }
      u.q[12] = base3_digits4(s0, 81);
      u.q[13] = base3_digits4(s1, 81);
      // values 120 + 2n + h: word 14 = digits 0, 1 of (qh[0], qh[1]); word 15 = digits 2, 3
      u.q[14] = (base3_digits4(h, 1) & 0xFFFFu) | (base3_digits4(h, 3) << 16);
      u.q[15] = (base3_digits4(h, 9) & 0xFFFFu) | (base3_digits4(h, 27) << 16);
    }
    ternary_scales(half_to_f32(uint16_t(ld_u16(b + 26))), u);
  }
};

// Float types: a unit is 16 bytes of the row (4 f32 or 8 f16/bf16 values), decoded to f32 exactly.
// Rows may end inside a unit (any n_in): the values past n_in read as 0 and nothing past the row's
// last byte is read. kVec: the row's first byte is 16-byte aligned (one 16-byte load per whole unit).
template <int V>
struct FUnit {
  float w[V];
};

struct DecF32 {
  static constexpr int kValues = 4, kElemBytes = 4;
  POLYKV_HD static float elem(const uint8_t* p) { return bits_to_f32(ld_u32<4>(p)); }
  POLYKV_HD static void word(uint32_t v, float* out) { out[0] = bits_to_f32(v); }
  static constexpr int kPerWord = 1;
};
struct DecF16 {
  static constexpr int kValues = 8, kElemBytes = 2;
  POLYKV_HD static float elem(const uint8_t* p) { return half_to_f32(uint16_t(ld_u16(p))); }
  POLYKV_HD static void word(uint32_t v, float* out) {
    out[0] = half_to_f32(uint16_t(v & 0xFFFF));
    out[1] = half_to_f32(uint16_t(v >> 16));
  }
  static constexpr int kPerWord = 2;
};
struct DecBF16 {
  static constexpr int kValues = 8, kElemBytes = 2;
  POLYKV_HD static float elem(const uint8_t* p) { return bf16_to_f32(uint16_t(ld_u16(p))); }
  POLYKV_HD static void word(uint32_t v, float* out) {
    out[0] = bf16_to_f32(uint16_t(v & 0xFFFF));
    out[1] = bf16_to_f32(uint16_t(v >> 16));
  }
  static constexpr int kPerWord = 2;
};

// The unit of values i0 .. i0+V-1 of a float row of n_in values, its first byte at p (16-byte
// aligned if kVec).
template <class F, bool kVec>
POLYKV_HD void load_float_unit_at(const uint8_t* p, int64_t i0, int64_t n_in, FUnit<F::kValues>& out) {
  constexpr int V = F::kValues;
  if (kVec && i0 + V <= n_in) {
    uint32_t v[4];
    ld_16B<16>(p, v);
#pragma unroll
    for (int k = 0; k < 4; ++k) F::word(v[k], out.w + k * F::kPerWord);
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) out.w[k] = (i0 + k < n_in) ? F::elem(p + k * F::kElemBytes) : 0.0f;
  }
}

// Unit u (values u*V .. u*V+V-1) of a float row of n_in values starting at `row`.
template <class F, bool kVec>
POLYKV_HD void load_float_unit(const uint8_t* row, int64_t u, int64_t n_in, FUnit<F::kValues>& out) {
  const int64_t i0 = u * F::kValues;
  load_float_unit_at<F, kVec>(row + i0 * F::kElemBytes, i0, n_in, out);
}

// Calls fn(Dec{}) with the decoder of quantized type t and returns true, or returns false for a type
// without one (the float types, or types matmul does not take).
template <class Fn>
bool visit_quant_decoder(DType t, Fn&& fn) {
  switch (t) {
    case DType::Q4_0: fn(DecQ4_0{}); return true;
    case DType::Q4_1: fn(DecQ4_1{}); return true;
    case DType::Q5_0: fn(DecQ5_0{}); return true;
    case DType::Q5_1: fn(DecQ5_1{}); return true;
    case DType::Q8_0: fn(DecQ8_0{}); return true;
    case DType::Q2_K: fn(DecQ2_K{}); return true;
    case DType::Q3_K: fn(DecQ3_K{}); return true;
    case DType::Q4_K: fn(DecQ4_K{}); return true;
    case DType::Q5_K: fn(DecQ5_K{}); return true;
    case DType::Q6_K: fn(DecQ6_K{}); return true;
    case DType::MXFP4: fn(DecMXFP4{}); return true;
    case DType::TQ1_0: fn(DecTQ1_0{}); return true;
    case DType::TQ2_0: fn(DecTQ2_0{}); return true;
    case DType::PTQ1_0: fn(DecPTQ1_0{}); return true;
    default: return false;
  }
}

// The same for the float types.
template <class Fn>
bool visit_float_decoder(DType t, Fn&& fn) {
  switch (t) {
    case DType::F32: fn(DecF32{}); return true;
    case DType::F16: fn(DecF16{}); return true;
    case DType::BF16: fn(DecBF16{}); return true;
    default: return false;
  }
}

}  // namespace polykv::cuda::hd
