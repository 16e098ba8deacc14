// Dot kernels for the k-quants (q2_K..q6_K) against Q8_K activations, written once over an integer
// op policy `Ops` and instantiated by the AVX2 and AVX-512 TUs. Same decomposition as the scalar
// kernels (kquant_kernels_scalar.cpp): unsigned quants u of 32 values per 256-bit vector, multiplied
// with the activation bytes into int16 pairs (maddubs; u <= 63 so no saturation), weighted by the
// sub-block scales into int32 lanes, offsets/mins folded in through the activations' bsums; one
// float FMA per super-block.
//
// Ops must provide:
//   __m256i dot_u8s8_scaled(__m256i acc, __m256i u, __m256i s, __m256i sc16)
//       acc + per-int32-lane Σ over lane pairs of maddubs(u, s) * sc16 (u in 0..63, s in -127..127)
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

template <typename Ops>
float kq_dot_q2_K(const void* w_row, const ActRow& a, int64_t n) {
  const BlockQ2_K* w = static_cast<const BlockQ2_K*>(w_row);
  const __m256i m3 = _mm256_set1_epi8(3);
  __m256 acc = _mm256_setzero_ps(), acc_m = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / 256; ++b) {
    const BlockQ2_K& x = w[b];
    const int8_t* q = a.qs + b * 256;
    __m256i isum = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      __m256i bits = load256(x.qs + 32 * h);  // shifted right by 2 per 32-value group
      for (int j = 0; j < 4; ++j) {
        const int k = 8 * h + 2 * j;  // sub-blocks k, k+1
        const __m256i u = _mm256_and_si256(bits, m3);
        const __m256i sc = scales_pair(x.scales[k] & 0x0F, x.scales[k + 1] & 0x0F);
        isum = Ops::dot_u8s8_scaled(isum, u, load256(q + 32 * (4 * h + j)), sc);
        bits = _mm256_srli_epi16(bits, 2);
      }
    }
    const __m128i raw = load128(x.scales);
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(0x0F)));
    const __m256i msum = scaled_bsums(a.bsums + b * 16, mins);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(a.d[b] * half_to_f32(x.d)), acc);
    acc_m = _mm256_fmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_set1_ps(a.d[b] * half_to_f32(x.dmin)), acc_m);
  }
  return hsum_ps(acc) - hsum_ps(acc_m);
}

template <typename Ops>
float kq_dot_q3_K(const void* w_row, const ActRow& a, int64_t n) {
  const BlockQ3_K* w = static_cast<const BlockQ3_K*>(w_row);
  const __m256i m3 = _mm256_set1_epi8(3), m1 = _mm256_set1_epi8(1);
  __m256 acc = _mm256_setzero_ps();
  int8_t s[16];
  for (int64_t b = 0; b < n / 256; ++b) {
    const BlockQ3_K& x = w[b];
    const int8_t* q = a.qs + b * 256;
    unpack_scales_q3_K(x.scales, s);
    __m256i hbits = load256(x.hmask);  // shifted right by 1 per 32-value group
    __m256i isum = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      __m256i bits = load256(x.qs + 32 * h);
      for (int j = 0; j < 4; ++j) {
        const int k = 8 * h + 2 * j;
        const __m256i high = _mm256_slli_epi16(_mm256_and_si256(hbits, m1), 2);  // 0 or 4
        const __m256i u = _mm256_or_si256(_mm256_and_si256(bits, m3), high);     // q = u - 4
        isum = Ops::dot_u8s8_scaled(isum, u, load256(q + 32 * (4 * h + j)), scales_pair(s[k], s[k + 1]));
        bits = _mm256_srli_epi16(bits, 2);
        hbits = _mm256_srli_epi16(hbits, 1);
      }
    }
    // Σ_k s[k] * (Σ u·q - 4 * bsum[k])
    const __m256i corr = scaled_bsums(a.bsums + b * 16, _mm256_cvtepi8_epi16(load128(s)));
    isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(corr, 2));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(a.d[b] * half_to_f32(x.d)), acc);
  }
  return hsum_ps(acc);
}

// q4_K and q5_K: 8 sub-blocks of 32; the 32 qs bytes of group j hold sub-blocks 2j (low nibbles)
// and 2j+1 (high nibbles); q5_K's fifth bits are bits 2j, 2j+1 of qh[0..31].
template <typename Ops, typename Block, bool kFiveBit>
float kq_dot_q45_K(const void* w_row, const ActRow& a, int64_t n) {
  const Block* w = static_cast<const Block*>(w_row);
  const __m256i m4 = _mm256_set1_epi8(0x0F), m1 = _mm256_set1_epi8(1);
  __m256 acc = _mm256_setzero_ps();
  float acc_m = 0.0f;
  uint8_t sc[8], m[8];
  for (int64_t b = 0; b < n / 256; ++b) {
    const Block& x = w[b];
    const int8_t* q = a.qs + b * 256;
    unpack_scales_mins_k4(x.scales, sc, m);
    __m256i hbits = _mm256_setzero_si256();
    if constexpr (kFiveBit) hbits = load256(x.qh);  // shifted right by 2 per group
    __m256i isum = _mm256_setzero_si256();
    for (int j = 0; j < 4; ++j) {
      const __m256i raw = load256(x.qs + 32 * j);
      __m256i lo = _mm256_and_si256(raw, m4);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
      if constexpr (kFiveBit) {
        lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(hbits, m1), 4));
        hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 1), m1), 4));
        hbits = _mm256_srli_epi16(hbits, 2);
      }
      isum = Ops::dot_u8s8_scaled(isum, lo, load256(q + 64 * j), _mm256_set1_epi16(sc[2 * j]));
      isum = Ops::dot_u8s8_scaled(isum, hi, load256(q + 64 * j + 32), _mm256_set1_epi16(sc[2 * j + 1]));
    }
    const int16_t* bs = a.bsums + b * 16;
    int32_t sum_m = 0;
    for (int j = 0; j < 8; ++j) sum_m += m[j] * (bs[2 * j] + bs[2 * j + 1]);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(a.d[b] * half_to_f32(x.d)), acc);
    acc_m += a.d[b] * half_to_f32(x.dmin) * float(sum_m);
  }
  return hsum_ps(acc) - acc_m;
}

template <typename Ops>
float kq_dot_q6_K(const void* w_row, const ActRow& a, int64_t n) {
  const BlockQ6_K* w = static_cast<const BlockQ6_K*>(w_row);
  const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(3);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / 256; ++b) {
    const BlockQ6_K& x = w[b];
    const int8_t* q = a.qs + b * 256;
    const int8_t* sc = x.scales;
    __m256i isum = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      // Half h (128 values): groups g = 0..3 of 32 values, sub-blocks 8h+2g and 8h+2g+1.
      const __m256i ql0 = load256(x.ql + 64 * h), ql1 = load256(x.ql + 64 * h + 32);
      const __m256i qh = load256(x.qh + 32 * h);
      const __m256i lows[4] = {_mm256_and_si256(ql0, m4), _mm256_and_si256(ql1, m4),
                               _mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                               _mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4)};
      __m256i hbits = qh;  // shifted right by 2 per group
      for (int g = 0; g < 4; ++g) {
        const int k = 8 * h + 2 * g;
        const __m256i u = _mm256_or_si256(lows[g], _mm256_slli_epi16(_mm256_and_si256(hbits, m2), 4));
        isum = Ops::dot_u8s8_scaled(isum, u, load256(q + 128 * h + 32 * g), scales_pair(sc[k], sc[k + 1]));
        hbits = _mm256_srli_epi16(hbits, 2);
      }
    }
    // Σ_k sc[k] * (Σ u·q - 32 * bsum[k])
    const __m256i corr = scaled_bsums(a.bsums + b * 16, _mm256_cvtepi8_epi16(load128(sc)));
    isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(corr, 5));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(a.d[b] * half_to_f32(x.d)), acc);
  }
  return hsum_ps(acc);
}

template <typename Ops>
RowDotFn kquant_kernel(DType type) {
  switch (type) {
    case DType::Q2_K: return each_token<kq_dot_q2_K<Ops>>;
    case DType::Q3_K: return each_token<kq_dot_q3_K<Ops>>;
    case DType::Q4_K: return each_token<kq_dot_q45_K<Ops, BlockQ4_K, false>>;
    case DType::Q5_K: return each_token<kq_dot_q45_K<Ops, BlockQ5_K, true>>;
    case DType::Q6_K: return each_token<kq_dot_q6_K<Ops>>;
    default: return nullptr;
  }
}

}  // namespace
}  // namespace polykv::cpu
