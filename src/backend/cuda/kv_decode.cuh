// Row decoders of every KV type (kv/kv_type.h) for the CUDA attention kernels, written once as
// __host__ __device__ code so that the CPU test (tests/cuda_kv_decode_test.cpp, compiled by g++)
// checks the very functions the kernels run against the scalar references of kv/ and quant/.
//
// The unit of decoding is a piece of 8 consecutive values (dims 8c .. 8c+7 of a row): every type's
// storage has a byte-aligned record for 8 values (q8_0: 8 bytes of a block; q4_0: 8 nibbles of one
// half of a block; turbo<b>: b bytes of indices; turbo<b>t: one byte of trellis bits and b-1 bytes of
// indices). Values come out in the row's stored basis: the original basis for f32/f16/bf16/q8_0/q4_0,
// the rotated basis H·S (per group) for turbo*, exactly as the CPU's decode_rotated produces them
// (bit-identical: the same float products). Attention then dots the keys with a rotated query and
// accumulates values in the rotated basis, rotating the output back once (kv/kv_type.h "prepared").
//
// Rows are only 2-byte aligned in general (the pool packs rows of 18, 26, 50, ... bytes), so wider
// loads check their alignment; little-endian byte order on both sides.
//
// Constants (turbo and trellis levels, rotation signs, the trellis subset word, the FWHT scale) are
// never re-derived here: make_kv_decode_tables() copies them out of the CPU code (quant/), and the
// CUDA side uploads that struct once.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "core/fp16.h"
#include "kv/kv_type.h"
#include "quant/turbo.h"
#include "quant/turbo_internal.h"
#include "quant/turbo_trellis.h"

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#define POLYKV_HD __host__ __device__ __forceinline__
#else
#define POLYKV_HD inline
#endif

namespace polykv::cuda {

// Group sizes of the turbo types, index of a table slot: 32 -> 0, 64 -> 1, 128 -> 2.
POLYKV_HD constexpr int turbo_group_of(int head_dim) { return head_dim % 128 == 0 ? 128 : head_dim; }
POLYKV_HD constexpr int group_slot(int group) { return group == 32 ? 0 : group == 64 ? 1 : 2; }

struct KvDecodeTables {
  float turbo[3][3][16];    // [bits - 2][group slot][level]: turbo::levels(bits, group), 2^bits used
  float trellis[3][3][32];  // [bits - 2][group slot][level]: turbo::trellis::levels(bits, group), 2^(bits+1) used
  float signs[3][128];      // [group slot][i]: the ±1 diagonal S of the rotation (turbo.h "Signs")
  float fwht_scale[3];      // [group slot]: 1/sqrt(n) exactly as the CPU's fwht computes it
  uint32_t subset_word;     // turbo::trellis::kSubsetWord: subset of window w = (word >> 2w) & 3
};

// The tables, filled from the CPU's functions (host only).
inline KvDecodeTables make_kv_decode_tables() {
  KvDecodeTables t{};
  const int groups[3] = {32, 64, 128};
  for (int b = 2; b <= 4; ++b)
    for (int s = 0; s < 3; ++s) {
      const float* lv = turbo::levels(b, groups[s]);
      for (int k = 0; k < (1 << b); ++k) t.turbo[b - 2][s][k] = lv[k];
      const float* tl = turbo::trellis::levels(b, groups[s]);
      for (int k = 0; k < (2 << b); ++k) t.trellis[b - 2][s][k] = tl[k];
    }
  for (int s = 0; s < 3; ++s) {
    const int n = groups[s];
    const float* sign = turbo::detail::sign_table(n);
    for (int i = 0; i < n; ++i) t.signs[s][i] = sign[i];
    t.fwht_scale[s] = float(1.0 / std::sqrt(double(n)));  // as quant/turbo_rotation.cpp's fwht (tested bit-exact)
  }
  t.subset_word = turbo::trellis::kSubsetWord;
  return t;
}

// ---- type traits ----

POLYKV_HD constexpr int kv_turbo_bits(KvType t) {
  return t == KvType::Turbo4 ? 4 : t == KvType::Turbo3 ? 3 : t == KvType::Turbo2 ? 2 : 0;
}
POLYKV_HD constexpr int kv_trellis_bits(KvType t) {
  return t == KvType::Turbo4T ? 4 : t == KvType::Turbo3T ? 3 : t == KvType::Turbo2T ? 2 : 0;
}
POLYKV_HD constexpr bool kv_rotated(KvType t) { return kv_turbo_bits(t) != 0 || kv_trellis_bits(t) != 0; }

// The levels a row of type t and head_dim uses (nullptr for unrotated types).
POLYKV_HD const float* kv_levels(const KvDecodeTables& tab, KvType t, int head_dim) {
  const int slot = group_slot(turbo_group_of(head_dim));
  if (const int b = kv_turbo_bits(t)) return tab.turbo[b - 2][slot];
  if (const int b = kv_trellis_bits(t)) return tab.trellis[b - 2][slot];
  return nullptr;
}
// Number of levels kv_levels returns (0 for unrotated types).
POLYKV_HD constexpr int kv_n_levels(KvType t) {
  return kv_turbo_bits(t) ? (1 << kv_turbo_bits(t)) : kv_trellis_bits(t) ? (2 << kv_trellis_bits(t)) : 0;
}

// ---- loads (p at least 2-byte aligned) ----

POLYKV_HD uint32_t ld_u8(const uint8_t* p) { return *p; }
POLYKV_HD uint32_t ld_u16(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const uint16_t*>(p);
#else
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
#endif
}
POLYKV_HD uint32_t ld_u32(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  if ((reinterpret_cast<uintptr_t>(p) & 3) == 0) return *reinterpret_cast<const uint32_t*>(p);
  return ld_u16(p) | (ld_u16(p + 2) << 16);
#else
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
#endif
}

// 8 bytes at p (2-byte aligned) as two little-endian words. On the GPU: three aligned 32-bit loads
// funnel-shifted into place (no branch on the alignment, which differs between the lanes of a warp
// for q8_0's 34-byte blocks); only words holding some of the 8 bytes are read (the third one only
// when p is not 4-byte aligned: a predicated load).
POLYKV_HD void ld_u32x2(const uint8_t* p, uint32_t& w0, uint32_t& w1) {
#if defined(__CUDA_ARCH__)
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  const uint32_t* w = reinterpret_cast<const uint32_t*>(a & ~uintptr_t(3));
  const uint32_t sh = uint32_t(a & 3u) * 8u;
  const uint32_t x0 = w[0], x1 = w[1], x2 = sh != 0 ? w[2] : 0u;
  w0 = __funnelshift_r(x0, x1, sh);
  w1 = __funnelshift_r(x1, x2, sh);
#else
  w0 = ld_u32(p);
  w1 = ld_u32(p + 4);
#endif
}

POLYKV_HD float half_to_float(uint32_t h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(static_cast<unsigned short>(h)));
#else
  return fp16_to_f32(static_cast<uint16_t>(h));
#endif
}
POLYKV_HD float bits_to_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  return f32_from_bits(u);
#endif
}

// Small integers to float without a conversion instruction (a quarter- or eighth-rate pipe on the
// GPU): the float with bits 0x4B000000 | u is 2^23 + u exactly for u < 2^23, so subtracting 2^23 + o
// gives u - o exactly (the same float as float(int(u) - o)).
// magic_byte(w, k): bits 0x4B000000 | byte k of w (k compile-time after unrolling).
POLYKV_HD uint32_t magic_byte(uint32_t w, int k) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(w, 0x4B000000u, 0x7650u | unsigned(k));
#else
  return 0x4B000000u | ((w >> (8 * k)) & 0xffu);
#endif
}
constexpr float kMagic = 8388608.0f;  // 2^23

// ---- one piece: values 8c .. 8c+7 of a row of head_dim values, stored basis ----
// lv: kv_levels(type, head_dim) (turbo types only); subset_word: KvDecodeTables::subset_word.

template <KvType T>
POLYKV_HD void decode8(const uint8_t* row, int c, int head_dim, const float* lv, uint32_t subset_word, float* out) {
  if constexpr (T == KvType::F32) {
    const uint8_t* p = row + 32 * c;
#pragma unroll
    for (int k = 0; k < 8; ++k) out[k] = bits_to_float(ld_u32(p + 4 * k));
  } else if constexpr (T == KvType::F16 || T == KvType::BF16) {
    const uint8_t* p = row + 16 * c;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const uint32_t w = ld_u32(p + 4 * k);
      if constexpr (T == KvType::F16) {
        out[2 * k] = half_to_float(w & 0xffffu);
        out[2 * k + 1] = half_to_float(w >> 16);
      } else {
        out[2 * k] = bits_to_float(w << 16);
        out[2 * k + 1] = bits_to_float(w & 0xffff0000u);
      }
    }
  } else if constexpr (T == KvType::Q8_0) {
    // Block of 34 bytes: fp16 d, 32 int8; piece c is quarter c % 4 of block c / 4.
    const uint8_t* blk = row + 34 * (c >> 2);
    const float d = half_to_float(ld_u16(blk));
    const uint8_t* qs = blk + 2 + 8 * (c & 3);
    // Bytes offset by 128 (x ^ 0x80 = x + 128 for int8 x), then to float by the magic constant.
    uint32_t w0, w1;
    ld_u32x2(qs, w0, w1);
    w0 ^= 0x80808080u;
    w1 ^= 0x80808080u;
#pragma unroll
    for (int k = 0; k < 8; ++k) out[k] = (bits_to_float(magic_byte(k < 4 ? w0 : w1, k & 3)) - (kMagic + 128.0f)) * d;
  } else if constexpr (T == KvType::Q4_0) {
    // Block of 18 bytes: fp16 d, 16 bytes; value j < 16 is the low nibble of byte j, j >= 16 the
    // high nibble of byte j - 16.
    const uint8_t* blk = row + 18 * (c >> 2);
    const float d = half_to_float(ld_u16(blk));
    const int j0 = 8 * (c & 3);
    const uint8_t* qs = blk + 2 + (j0 & 15);
    const int shift = j0 >= 16 ? 4 : 0;
    const uint32_t w0 = ld_u32(qs), w1 = ld_u32(qs + 4);
#pragma unroll
    for (int k = 0; k < 8; ++k)
      out[k] = (bits_to_float(0x4B000000u | (((k < 4 ? w0 : w1) >> (8 * (k & 3) + shift)) & 15u)) - (kMagic + 8.0f)) * d;
  } else if constexpr (kv_turbo_bits(T) != 0) {
    constexpr int b = kv_turbo_bits(T);
    const int n = turbo_group_of(head_dim);
    const int i0 = 8 * c, g = i0 / n, i = i0 - g * n;
    const uint8_t* rec = row + g * (2 + n * b / 8);
    const float norm = half_to_float(ld_u16(rec));
    const uint8_t* ib = rec + 2 + b * (i >> 3);  // 8 indices of b bits: b bytes, LSB first
    uint32_t bits;
    if constexpr (b == 2) bits = ld_u16(ib);
    else if constexpr (b == 4) bits = ld_u32(ib);
    else bits = ld_u8(ib) | (ld_u8(ib + 1) << 8) | (ld_u8(ib + 2) << 16);
#pragma unroll
    for (int k = 0; k < 8; ++k) out[k] = norm * lv[(bits >> (b * k)) & ((1u << b) - 1)];
  } else {
    static_assert(kv_trellis_bits(T) != 0, "unknown KV type");
    constexpr int b = kv_trellis_bits(T);
    const int n = turbo_group_of(head_dim);
    const int i0 = 8 * c, g = i0 / n, i = i0 - g * n;
    const uint8_t* rec = row + g * (2 + n * b / 8);
    const float norm = half_to_float(ld_u16(rec));
    const uint8_t* tb = rec + 2;
    const uint8_t* jb = rec + 2 + n / 8 + (b - 1) * (i >> 3);  // 8 indices of b-1 bits
    // x bit k = trellis bit t_{i-3+k} (k = 0..10; t_m = 0 for m < 0): window of coordinate i + k is
    // (x >> k) & 15 = t_{i+k-3} | t_{i+k-2} << 1 | t_{i+k-1} << 2 | t_{i+k} << 3.
    const uint32_t prev = i > 0 ? ld_u8(tb + (i >> 3) - 1) >> 5 : 0u;
    const uint32_t x = prev | (ld_u8(tb + (i >> 3)) << 3);
    uint32_t js;
    if constexpr (b == 2) js = ld_u8(jb);
    else if constexpr (b == 3) js = ld_u8(jb) | (ld_u8(jb + 1) << 8);
    else js = ld_u8(jb) | (ld_u8(jb + 1) << 8) | (ld_u8(jb + 2) << 16);
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const uint32_t w = (x >> k) & 15u;
      const uint32_t s = (subset_word >> (2 * w)) & 3u;
      const uint32_t j = (js >> ((b - 1) * k)) & ((1u << (b - 1)) - 1);
      out[k] = norm * lv[s + 4 * j];
    }
  }
}

// ---- whole rows (the kernels work on pieces; these are the row-level contracts, used by tests) ----

// q_prepared · row: q_prepared is the query in the row's basis (rotate_head(q) for turbo types, q
// itself otherwise; f32 in every case, unlike the CPU's q8_0 prepared query).
template <KvType T>
POLYKV_HD float row_dot(const uint8_t* row, const float* q_prepared, int head_dim, const float* lv,
                        uint32_t subset_word) {
  float s = 0.0f, v[8];
  for (int c = 0; c < head_dim / 8; ++c) {
    decode8<T>(row, c, head_dim, lv, subset_word, v);
    for (int k = 0; k < 8; ++k) s += q_prepared[8 * c + k] * v[k];
  }
  return s;
}

// acc[i] += a * row[i] in the row's basis.
template <KvType T>
POLYKV_HD void row_axpy(float a, const uint8_t* row, float* acc, int head_dim, const float* lv, uint32_t subset_word) {
  float v[8];
  for (int c = 0; c < head_dim / 8; ++c) {
    decode8<T>(row, c, head_dim, lv, subset_word, v);
    for (int k = 0; k < 8; ++k) acc[8 * c + k] += a * v[k];
  }
}

// ---- rotation H·S per group (turbo.h), scalar: the same butterflies as the CPU's fwht ----

POLYKV_HD void fwht_group(float* x, int n, float scale) {
  for (int h = 1; h < n; h *= 2)
    for (int i = 0; i < n; i += 2 * h)
      for (int j = i; j < i + h; ++j) {
        const float a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
  for (int i = 0; i < n; ++i) x[i] *= scale;
}

// x <- H·S·x per group (a query into a turbo row's basis).
POLYKV_HD void rotate_head(float* x, int head_dim, const KvDecodeTables& tab) {
  const int n = turbo_group_of(head_dim), slot = group_slot(n);
  for (int g = 0; g < head_dim; g += n) {
    for (int i = 0; i < n; ++i) x[g + i] *= tab.signs[slot][i];
    fwht_group(x + g, n, tab.fwht_scale[slot]);
  }
}

// y <- S·H·y per group (an output accumulated in a turbo basis back to the original basis).
POLYKV_HD void unrotate_head(float* y, int head_dim, const KvDecodeTables& tab) {
  const int n = turbo_group_of(head_dim), slot = group_slot(n);
  for (int g = 0; g < head_dim; g += n) {
    fwht_group(y + g, n, tab.fwht_scale[slot]);
    for (int i = 0; i < n; ++i) y[g + i] *= tab.signs[slot][i];
  }
}

// Calls f(std::integral_constant<KvType, t>{}) for the runtime type t (one instantiation per type).
template <class F>
POLYKV_HD void kv_type_dispatch(KvType t, F&& f) {
  switch (t) {
    case KvType::F32: f(std::integral_constant<KvType, KvType::F32>{}); break;
    case KvType::F16: f(std::integral_constant<KvType, KvType::F16>{}); break;
    case KvType::BF16: f(std::integral_constant<KvType, KvType::BF16>{}); break;
    case KvType::Q8_0: f(std::integral_constant<KvType, KvType::Q8_0>{}); break;
    case KvType::Q4_0: f(std::integral_constant<KvType, KvType::Q4_0>{}); break;
    case KvType::Turbo4: f(std::integral_constant<KvType, KvType::Turbo4>{}); break;
    case KvType::Turbo3: f(std::integral_constant<KvType, KvType::Turbo3>{}); break;
    case KvType::Turbo2: f(std::integral_constant<KvType, KvType::Turbo2>{}); break;
    case KvType::Turbo4T: f(std::integral_constant<KvType, KvType::Turbo4T>{}); break;
    case KvType::Turbo3T: f(std::integral_constant<KvType, KvType::Turbo3T>{}); break;
    case KvType::Turbo2T: f(std::integral_constant<KvType, KvType::Turbo2T>{}); break;
  }
}

}  // namespace polykv::cuda
