// Ternary dot kernels (ternary_kernels.h) written once over an integer op policy `Ops` and
// instantiated by the AVX2 and AVX-512 TUs. A weight block is unpacked into vectors of 32 codes
// c = t + 1 (bytes 0..3) in value order, then each token's activation bytes are multiplied into
// int32 lanes (Ops::dot_u8s8), the activation sums subtracted (Σ c q - Σ q = Σ t q, exact) and the
// lanes scaled into the token's float accumulator: one FMA per block (PTQ1_0: on four lanes, one per
// 32 values, as its Q8_32 activations have a scale per 32). The order of those FMAs per token is fixed,
// so the result does not depend on NT.
//
// Base-3 digits without a multiply: byte * 3 mod 256 is three byte adds, so each further digit costs
// two adds; digit 0 of a byte q is (3q) >> 8 = (q >= 86) + (q >= 171) (Ops::digit0).
//
// Ops must provide:
//   __m256i dot_u8s8(__m256i acc, __m256i u, __m256i s)  acc + Σ over each int32 lane's 4 bytes u*s
//   __m256i digit0(__m256i q)                              per byte: (3q) >> 8 (0, 1 or 2)
// Include only from an ISA TU. Internal linkage (see x86_common.h).
#pragma once
#include <type_traits>

#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/x86_common.h"
#include "quant/ternary.h"

namespace polykv::cpu {
namespace {

inline __m256i mul3_epi8(__m256i q) { return _mm256_add_epi8(q, _mm256_add_epi8(q, q)); }
inline __m128i mul3_epi8(__m128i q) { return _mm_add_epi8(q, _mm_add_epi8(q, q)); }
inline __m256i mul9_epi8(__m256i q) { return mul3_epi8(mul3_epi8(q)); }
inline __m256i join128(__m128i lo, __m128i hi) { return _mm256_set_m128i(hi, lo); }

// TQ2_0: u[4c + k] = codes of values 128c + 32k .. +31 (bits 2k of qs[32c .. 32c + 31]).
inline void unpack_tq2_0(const BlockTQ2_0& x, __m256i u[8]) {
  const __m256i m3 = _mm256_set1_epi8(3);
#pragma GCC unroll 2
  for (int c = 0; c < 2; ++c) {
    const __m256i bits = load256(x.qs + 32 * c);
    u[4 * c + 0] = _mm256_and_si256(bits, m3);
    u[4 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(bits, 2), m3);
    u[4 * c + 2] = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m3);
    u[4 * c + 3] = _mm256_and_si256(_mm256_srli_epi16(bits, 6), m3);
  }
}

// The four 4-trit-byte powers h, 3h, 9h, 27h of a 128-bit vector.
struct Pow3x4 {
  __m128i p[4];
  explicit Pow3x4(__m128i h) {
    p[0] = h;
    for (int n = 1; n < 4; ++n) p[n] = mul3_epi8(p[n - 1]);
  }
};

// TQ1_0: u[g] = codes of values 32g .. 32g + 31.
template <typename Ops>
inline void unpack_tq1_0(const BlockTQ1_0& x, __m256i u[8]) {
  __m256i q = load256(x.qs);  // 32-byte stage: digit n of byte m is value 32n + m
#pragma GCC unroll 5
  for (int n = 0; n < 5; ++n) {
    u[n] = Ops::digit0(q);
    q = mul3_epi8(q);
  }
  const __m128i s = load128(x.qs + 32);  // 16-byte stage: digit n of byte m is value 160 + 16n + m
  __m256i p = join128(s, mul3_epi8(s));  // digits 0 | 1
  u[5] = Ops::digit0(p);                 // values 160..191
  p = mul9_epi8(p);                      // digits 2 | 3
  u[6] = Ops::digit0(p);                 // values 192..223
  p = mul9_epi8(p);                      // digit 4 in the low half (values 224..239)
  // qh: digit n of qh[h] is value 240 + 4n + h; 32-bit lane n of the vector holds qh * 3^n.
  const Pow3x4 h(_mm_set1_epi32(int32_t(load_u32(x.qh))));
  __m128i hv = _mm_blend_epi32(h.p[0], h.p[1], 0x2);
  hv = _mm_blend_epi32(hv, h.p[2], 0x4);
  hv = _mm_blend_epi32(hv, h.p[3], 0x8);
  u[7] = Ops::digit0(join128(_mm256_castsi256_si128(p), hv));
}

// PTQ1_0: u[g] = codes of values 32g .. 32g + 31.
template <typename Ops>
inline void unpack_ptq1_0(const BlockPTQ1_0& x, __m256i u[4]) {
  const __m128i a = load128(x.qs);       // 16-byte stage: digit n of byte m is value 16n + m
  __m256i p = join128(a, mul3_epi8(a));  // digits 0 | 1: values 0..31
  u[0] = Ops::digit0(p);
  p = mul9_epi8(p);  // digits 2 | 3: values 32..63
  u[1] = Ops::digit0(p);
  p = mul9_epi8(p);  // digit 4 in the low half: values 64..79
  // 8-byte stage: digit n of byte m is value 80 + 8n + m.
  const __m128i s = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(x.qs + 16));
  const __m128i s3 = mul3_epi8(s), s9 = mul3_epi8(s3), s27 = mul3_epi8(s9), s81 = mul3_epi8(s27);
  u[2] = Ops::digit0(join128(_mm256_castsi256_si128(p), _mm_unpacklo_epi64(s, s3)));  // 64..79 | 80..95
  // qh: digit n of qh[h] is value 120 + 2n + h; 16-bit lane n holds (qh[0], qh[1]) * 3^n.
  const Pow3x4 h(_mm_set1_epi16(int16_t(x.qh[0] | (x.qh[1] << 8))));
  __m128i hv = _mm_blend_epi16(h.p[0], h.p[1], 0x2);
  hv = _mm_blend_epi16(hv, h.p[2], 0x4);
  hv = _mm_blend_epi16(hv, h.p[3], 0x8);
  u[3] = Ops::digit0(join128(_mm_unpacklo_epi64(s9, s27), _mm_unpacklo_epi64(s81, hv)));  // 96..111 | 112..127
}

// TQ1_0 / TQ2_0 against Q8_K activations.
template <typename Ops, DType kType>
struct TernaryQ8K {
  using Block = std::conditional_t<kType == DType::TQ1_0, BlockTQ1_0, BlockTQ2_0>;
  template <int NT>
  static void run(const void* w_row, const ActRow* a, int64_t n, float* out) {
    const Block* w = static_cast<const Block*>(w_row);
    const __m256i ones16 = _mm256_set1_epi16(1);
    __m256 acc[NT];
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
    __m256i u[8];
    for (int64_t b = 0; b < n / 256; ++b) {
      if constexpr (kType == DType::TQ1_0) unpack_tq1_0<Ops>(w[b], u);
      else unpack_tq2_0(w[b], u);
      const float d = half_to_f32(w[b].d);
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) {
        const int8_t* q = a[t].qs + b * 256;
        __m256i isum = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int g = 0; g < 8; ++g) isum = Ops::dot_u8s8(isum, u[g], load256(q + 32 * g));
        isum = _mm256_sub_epi32(isum, _mm256_madd_epi16(load256(a[t].bsums + 16 * b), ones16));
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(d * a[t].d[b]), acc[t]);
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) out[t] = hsum_ps(acc[t]);
  }
};

// PTQ1_0 against Q8_32 activations (blocks of 32: four per weight block). Per block and token the
// four integer sums are gathered into one int32x4 (horizontal adds), corrected by the activation sums,
// scaled by the four activation scales and added to the token's f32x4 accumulator with one FMA.
template <typename Ops>
struct Ptq1Q8_32 {
  template <int NT>
  static void run(const void* w_row, const ActRow* a, int64_t n, float* out) {
    const BlockPTQ1_0* w = static_cast<const BlockPTQ1_0*>(w_row);
    __m128 acc[NT];
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) acc[t] = _mm_setzero_ps();
    __m256i u[4];
    for (int64_t b = 0; b < n / kQK_PTQ1_0; ++b) {
      unpack_ptq1_0<Ops>(w[b], u);
      const __m128 d = _mm_set1_ps(half_to_f32(w[b].d));
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) {
        const int8_t* q = a[t].qs + b * kQK_PTQ1_0;
        const __m256i zero = _mm256_setzero_si256();
        const __m256i p01 = _mm256_hadd_epi32(Ops::dot_u8s8(zero, u[0], load256(q)),
                                              Ops::dot_u8s8(zero, u[1], load256(q + 32)));
        const __m256i p23 = _mm256_hadd_epi32(Ops::dot_u8s8(zero, u[2], load256(q + 64)),
                                              Ops::dot_u8s8(zero, u[3], load256(q + 96)));
        const __m256i p = _mm256_hadd_epi32(p01, p23);  // [S0 S1 S2 S3] partial sums in each half
        __m128i s = _mm_add_epi32(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
        s = _mm_sub_epi32(s, load128(a[t].sum + 4 * b));
        const __m128 f = _mm_mul_ps(_mm_cvtepi32_ps(s), _mm_loadu_ps(a[t].d + 4 * b));
        acc[t] = _mm_fmadd_ps(f, d, acc[t]);
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) {
      __m128 v = _mm_add_ps(acc[t], _mm_movehl_ps(acc[t], acc[t]));
      out[t] = _mm_cvtss_f32(_mm_add_ss(v, _mm_movehdup_ps(v)));
    }
  }
};

template <typename Ops>
RowDotFn ternary_kernel(DType type) {
  switch (type) {
    case DType::TQ1_0: return by_tokens<TernaryQ8K<Ops, DType::TQ1_0>>;
    case DType::TQ2_0: return by_tokens<TernaryQ8K<Ops, DType::TQ2_0>>;
    case DType::PTQ1_0: return by_tokens<Ptq1Q8_32<Ops>>;
    default: return nullptr;
  }
}

}  // namespace
}  // namespace polykv::cpu
