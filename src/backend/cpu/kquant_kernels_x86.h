// Dot kernels for the k-quants (q2_K..q6_K) against Q8_K activations, written once over an integer
// op policy `Ops` and instantiated by the AVX2 and AVX-512 TUs. Same decomposition as the scalar
// kernels (kquant_kernels_scalar.cpp): unsigned quants u of 32 values per 256-bit vector, multiplied
// with the activation bytes into int16 pairs (maddubs; u <= 63 so no saturation), weighted by the
// sub-block scales into int32 lanes, offsets/mins folded in through the activations' bsums; one
// float FMA per super-block and token. Each super-block is unpacked once into 8 vectors of 32
// unsigned quants + 8 int16 scale vectors (group g covers values 32g..32g+31), then reused for
// every one of the NT tokens.
//
// Ops must provide:
//   __m256i dot_u8s8_scaled(__m256i acc, __m256i u, __m256i s, __m256i sc16)
//       acc + per-int32-lane Σ over lane pairs of maddubs(u, s) * sc16 (u in 0..63, s in -127..127)
// Small fixed loops carry `#pragma GCC unroll` so that the unpacked vectors stay in registers (-O2
// would keep them on the stack).
// Include only from an ISA TU. Internal linkage (see x86_common.h).
#pragma once
#include "backend/cpu/kernel_kquant_scales.h"
#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/x86_common.h"
#include "quant/blocks.h"

namespace polykv::cpu {
namespace {

// Σ_k sc[k] * bsums[k] over the 16 sub-blocks, as int32x8 (lane total is the sum).
inline __m256i scaled_bsums(const int16_t* bsums, __m256i sc16) {
  return _mm256_madd_epi16(load256(bsums), sc16);
}

// One unpacked super-block: u[g] = unsigned quants of values 32g..32g+31, sc[g] = their int16
// scales (lanes 0..7 for the first 16 values, 8..15 for the second 16).
struct UnpackedSuperBlock {
  __m256i u[8];
  __m256i sc[8];
};

// Σ_g Σ_i u[g]_i * q[32g + i] * scale(g, i) as int32x8.
template <typename Ops>
inline __m256i superblock_dot(const UnpackedSuperBlock& s, const int8_t* q) {
  __m256i isum = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int g = 0; g < 8; ++g) isum = Ops::dot_u8s8_scaled(isum, s.u[g], load256(q + 32 * g), s.sc[g]);
  return isum;
}

// q2_K, q3_K: value 128h + 32j + l (l < 32) takes bits 2j..2j+1 of qs[32h + l]; q3_K adds bit
// (4h + j) of hmask[l] as the third bit.
template <bool kThreeBit, typename Block>
inline void unpack_low2(const Block& x, UnpackedSuperBlock& s) {
  const __m256i m3 = _mm256_set1_epi8(3), m1 = _mm256_set1_epi8(1);
  __m256i hbits = _mm256_setzero_si256();
  if constexpr (kThreeBit) hbits = load256(x.hmask);  // shifted right by 1 per group
#pragma GCC unroll 8
  for (int h = 0; h < 2; ++h) {
    __m256i bits = load256(x.qs + 32 * h);  // shifted right by 2 per group
#pragma GCC unroll 8
    for (int j = 0; j < 4; ++j) {
      __m256i u = _mm256_and_si256(bits, m3);
      if constexpr (kThreeBit) {
        u = _mm256_or_si256(u, _mm256_slli_epi16(_mm256_and_si256(hbits, m1), 2));  // q = u - 4
        hbits = _mm256_srli_epi16(hbits, 1);
      }
      s.u[4 * h + j] = u;
      bits = _mm256_srli_epi16(bits, 2);
    }
  }
}

// q2_K: x = d * sc[k] * u - dmin * m[k] (k: sub-block of 16; scales byte k = sc | m << 4).
template <typename Ops>
struct KqQ2_K {
  template <int NT>
  static void run(const void* w_row, const ActRow* a, int64_t n, float* out) {
    const BlockQ2_K* w = static_cast<const BlockQ2_K*>(w_row);
    __m256 acc[NT], acc_m[NT];
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) acc[t] = acc_m[t] = _mm256_setzero_ps();
    UnpackedSuperBlock s;
    for (int64_t b = 0; b < n / 256; ++b) {
      const BlockQ2_K& x = w[b];
      unpack_low2<false>(x, s);
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g) s.sc[g] = scales_pair(x.scales[2 * g] & 0x0F, x.scales[2 * g + 1] & 0x0F);
      const __m128i raw = load128(x.scales);
      const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(0x0F)));
      const float d = half_to_f32(x.d), dmin = half_to_f32(x.dmin);
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) {
        const __m256i isum = superblock_dot<Ops>(s, a[t].qs + b * 256);
        const __m256i msum = scaled_bsums(a[t].bsums + b * 16, mins);
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(a[t].d[b] * d), acc[t]);
        acc_m[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_set1_ps(a[t].d[b] * dmin), acc_m[t]);
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) out[t] = hsum_ps(_mm256_sub_ps(acc[t], acc_m[t]));
  }
};

// q3_K: x = d * s[k] * (u - 4), s signed 6-bit.
template <typename Ops>
struct KqQ3_K {
  template <int NT>
  static void run(const void* w_row, const ActRow* a, int64_t n, float* out) {
    const BlockQ3_K* w = static_cast<const BlockQ3_K*>(w_row);
    __m256 acc[NT];
    for (auto& v : acc) v = _mm256_setzero_ps();
    UnpackedSuperBlock s;
    int8_t sc[16];
    for (int64_t b = 0; b < n / 256; ++b) {
      const BlockQ3_K& x = w[b];
      unpack_low2<true>(x, s);
      unpack_scales_q3_K(x.scales, sc);
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g) s.sc[g] = scales_pair(sc[2 * g], sc[2 * g + 1]);
      const __m256i sc16 = _mm256_cvtepi8_epi16(load128(sc));
      const float d = half_to_f32(x.d);
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) {
        // Σ_k s[k] * (Σ u·q - 4 * bsum[k])
        const __m256i corr = scaled_bsums(a[t].bsums + b * 16, sc16);
        const __m256i isum = _mm256_sub_epi32(superblock_dot<Ops>(s, a[t].qs + b * 256), _mm256_slli_epi32(corr, 2));
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(a[t].d[b] * d), acc[t]);
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) out[t] = hsum_ps(acc[t]);
  }
};

// q4_K and q5_K: 8 sub-blocks of 32, x = d * sc[j] * u - dmin * m[j]; the 32 qs bytes of pair p hold
// sub-blocks 2p (low nibbles) and 2p+1 (high nibbles); q5_K's fifth bits are bits 2p, 2p+1 of qh[l].
template <typename Ops, typename Block, bool kFiveBit>
struct KqQ45_K {
  template <int NT>
  static void run(const void* w_row, const ActRow* a, int64_t n, float* out) {
    const Block* w = static_cast<const Block*>(w_row);
    const __m256i m4 = _mm256_set1_epi8(0x0F), m1 = _mm256_set1_epi8(1);
    __m256 acc[NT];
    float acc_m[NT] = {};
    for (auto& v : acc) v = _mm256_setzero_ps();
    UnpackedSuperBlock s;
    uint8_t sc[8], m[8];
    for (int64_t b = 0; b < n / 256; ++b) {
      const Block& x = w[b];
      unpack_scales_mins_k4(x.scales, sc, m);
      __m256i hbits = _mm256_setzero_si256();
      if constexpr (kFiveBit) hbits = load256(x.qh);  // shifted right by 2 per pair
#pragma GCC unroll 8
      for (int p = 0; p < 4; ++p) {
        const __m256i raw = load256(x.qs + 32 * p);
        __m256i lo = _mm256_and_si256(raw, m4);
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
        if constexpr (kFiveBit) {
          lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(hbits, m1), 4));
          hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 1), m1), 4));
          hbits = _mm256_srli_epi16(hbits, 2);
        }
        s.u[2 * p] = lo;
        s.u[2 * p + 1] = hi;
      }
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g) s.sc[g] = _mm256_set1_epi16(sc[g]);
      const float d = half_to_f32(x.d), dmin = half_to_f32(x.dmin);
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) {
        const __m256i isum = superblock_dot<Ops>(s, a[t].qs + b * 256);
        const int16_t* bs = a[t].bsums + b * 16;
        int32_t sum_m = 0;
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) sum_m += m[j] * (bs[2 * j] + bs[2 * j + 1]);
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(a[t].d[b] * d), acc[t]);
        acc_m[t] += a[t].d[b] * dmin * float(sum_m);
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) out[t] = hsum_ps(acc[t]) - acc_m[t];
  }
};

// q6_K: x = d * sc[k] * (u - 32), sc int8 per 16 values. Half h (128 values), group g (32 values):
// low 4 bits from ql[64h + 32(g&1) + l] (low nibble for g < 2, high for g >= 2), high 2 bits from
// bits 2g..2g+1 of qh[32h + l].
template <typename Ops>
struct KqQ6_K {
  template <int NT>
  static void run(const void* w_row, const ActRow* a, int64_t n, float* out) {
    const BlockQ6_K* w = static_cast<const BlockQ6_K*>(w_row);
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(3);
    __m256 acc[NT];
    for (auto& v : acc) v = _mm256_setzero_ps();
    UnpackedSuperBlock s;
    for (int64_t b = 0; b < n / 256; ++b) {
      const BlockQ6_K& x = w[b];
#pragma GCC unroll 8
      for (int h = 0; h < 2; ++h) {
        const __m256i ql0 = load256(x.ql + 64 * h), ql1 = load256(x.ql + 64 * h + 32);
        const __m256i lows[4] = {_mm256_and_si256(ql0, m4), _mm256_and_si256(ql1, m4),
                                 _mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                                 _mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4)};
        __m256i hbits = load256(x.qh + 32 * h);  // shifted right by 2 per group
#pragma GCC unroll 8
        for (int g = 0; g < 4; ++g) {
          s.u[4 * h + g] = _mm256_or_si256(lows[g], _mm256_slli_epi16(_mm256_and_si256(hbits, m2), 4));
          hbits = _mm256_srli_epi16(hbits, 2);
        }
      }
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g) s.sc[g] = scales_pair(x.scales[2 * g], x.scales[2 * g + 1]);
      const __m256i sc16 = _mm256_cvtepi8_epi16(load128(x.scales));
      const float d = half_to_f32(x.d);
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) {
        // Σ_k sc[k] * (Σ u·q - 32 * bsum[k])
        const __m256i corr = scaled_bsums(a[t].bsums + b * 16, sc16);
        const __m256i isum = _mm256_sub_epi32(superblock_dot<Ops>(s, a[t].qs + b * 256), _mm256_slli_epi32(corr, 5));
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(a[t].d[b] * d), acc[t]);
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) out[t] = hsum_ps(acc[t]);
  }
};

template <typename Ops>
RowDotFn kquant_kernel(DType type) {
  switch (type) {
    case DType::Q2_K: return by_tokens<KqQ2_K<Ops>>;
    case DType::Q3_K: return by_tokens<KqQ3_K<Ops>>;
    case DType::Q4_K: return by_tokens<KqQ45_K<Ops, BlockQ4_K, false>>;
    case DType::Q5_K: return by_tokens<KqQ45_K<Ops, BlockQ5_K, true>>;
    case DType::Q6_K: return by_tokens<KqQ6_K<Ops>>;
    default: return nullptr;
  }
}

}  // namespace
}  // namespace polykv::cpu
