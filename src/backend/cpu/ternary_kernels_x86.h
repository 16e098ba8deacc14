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
// TQ1_0 with VNNI and 1..2 tokens skips digit0 altogether: it multiplies the states q and 3q mod 256
// themselves (states_tq1_0: 3 * Σ q s - Σ (3q mod 256) s = 256 * Σ digit s). Both ways give the same
// int32 lanes, so the token count still does not change a bit of the result.
//
// Ops must provide:
//   __m256i dot_u8s8(__m256i acc, __m256i u, __m256i s)  acc + Σ over each int32 lane's 4 bytes u*s
//                                                          (exact for u up to 3; for any u if kStateDot)
//   __m256i digit0(__m256i q)                              per byte: (3q) >> 8 (0, 1 or 2)
//   static constexpr bool kStateDot                        dot_u8s8 is exact for all u8 (vpdpbusd; not
//                                                          maddubs, which saturates int16 pairs)
//   static constexpr bool kMasks                           AVX-512 BW/VL masked byte ops may be used
// Include only from an ISA TU. Internal linkage (see x86_common.h).
#pragma once
#include <type_traits>

#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/ternary_kernels.h"
#include "backend/cpu/x86_common.h"
#include "quant/ternary.h"

namespace polykv::cpu {
namespace {

inline __m256i mul3_epi8(__m256i q) { return _mm256_add_epi8(q, _mm256_add_epi8(q, q)); }
inline __m128i mul3_epi8(__m128i q) { return _mm_add_epi8(q, _mm_add_epi8(q, q)); }
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

// kPow3[b] = the bytes b, 3b, 9b, 27b (mod 256), lowest first: the four states of a qh byte
// (PTQ1_0's two qh bytes: 3.21 against 2.85 GB/s on one core with adds and blends).
struct Pow3Table {
  uint32_t v[256];
  constexpr Pow3Table() : v() {
    for (uint32_t b = 0; b < 256; ++b)
      v[b] = (b & 255) | ((3 * b) & 255) << 8 | ((9 * b) & 255) << 16 | ((27 * b) & 255) << 24;
  }
};
constexpr Pow3Table kPow3{};

// Base-3 *states* of a block (TQ1_0 / PTQ1_0): a[g] holds, byte for byte, the state q = byte * 3^n mod 256 whose
// digit 0 ((3q) >> 8) is the code of value 32g + j (j = byte position in the vector), and b[g] =
// 3 * a[g] mod 256, the next state. Since 3q = 256 * digit0(q) + (3q mod 256) exactly,
//   Σ_j code_j * s_j = (3 * Σ_j a_j s_j - Σ_j b_j s_j) / 256       (per int32 lane, exactly)
// which lets VNNI kernels skip the digit extraction: two u8 x s8 products per 32 values instead of a
// decode (4 ops) and one product (use_states). The decode kernels take digit0(a[g]).
// TQ1_0: 8 groups of 32 values. With AVX-512 masks (Ops::kMasks) the 16-byte stage's [s | 3s] and the
// qh powers take masked adds (broadcast, then x3 on the lanes that need it) instead of inserts and blends:
// 2 + 6 instructions instead of 3 + 9.
template <typename Ops>
inline void states_tq1_0(const BlockTQ1_0& x, __m256i a[8], __m256i b[8]) {
  __m256i q = load256(x.qs);  // 32-byte stage: digit n of byte m is value 32n + m
#pragma GCC unroll 5
  for (int n = 0; n < 5; ++n) {
    a[n] = q;
    q = mul3_epi8(q);
    b[n] = q;
  }
  // 16-byte stage: digit n of byte m is value 160 + 16n + m.
  if constexpr (Ops::kMasks) {
    const __m256i ss = _mm256_broadcastsi128_si256(load128(x.qs + 32));
    a[5] = _mm256_mask_add_epi8(ss, __mmask32(0xFFFF0000u), ss, _mm256_add_epi8(ss, ss));  // [s | 3s]
  } else {
    const __m128i s = load128(x.qs + 32);
    a[5] = join128(s, mul3_epi8(s));  // digits 0 | 1: values 160..191
  }
  b[5] = mul3_epi8(a[5]);
  a[6] = mul3_epi8(b[5]);                // digits 2 | 3: values 192..223
  b[6] = mul3_epi8(a[6]);                // [digit-3 state | digit-4 state: values 224..239]
  // qh: digit n of qh[h] is value 240 + 4n + h; 32-bit lane n of hv holds qh * 3^n.
  // (Powers by adds and blends: the 4x4 byte transpose of kPow3 entries was faster for one token
  // but much slower for four, 2.1 against 3.3 GB/s on one core.)
  const __m128i h0 = _mm_set1_epi32(int32_t(load_u32(x.qh)));
  __m128i hv;
  if constexpr (Ops::kMasks) {  // x3 on lanes 1..3, then 2..3, then 3
    hv = _mm_mask_add_epi8(h0, __mmask16(0xFFF0), h0, _mm_add_epi8(h0, h0));
    hv = _mm_mask_add_epi8(hv, __mmask16(0xFF00), hv, _mm_add_epi8(hv, hv));
    hv = _mm_mask_add_epi8(hv, __mmask16(0xF000), hv, _mm_add_epi8(hv, hv));
  } else {
    const __m128i h1 = mul3_epi8(h0), h2 = mul3_epi8(h1), h3 = mul3_epi8(h2);
    hv = _mm_blend_epi32(_mm_blend_epi32(_mm_blend_epi32(h0, h1, 0x2), h2, 0x4), h3, 0x8);
  }
  a[7] = _mm256_permute2x128_si256(b[6], _mm256_castsi128_si256(hv), 0x21);  // [b6 high | hv]
  b[7] = mul3_epi8(a[7]);
}

// PTQ1_0: 4 groups of 32 values.
inline void states_ptq1_0(const BlockPTQ1_0& x, __m256i a[4], __m256i b[4]) {
  const __m128i s16 = load128(x.qs);  // 16-byte stage: digit n of byte m is value 16n + m
  a[0] = join128(s16, mul3_epi8(s16));  // digits 0 | 1: values 0..31
  b[0] = mul3_epi8(a[0]);
  a[1] = mul3_epi8(b[0]);  // digits 2 | 3: values 32..63
  b[1] = mul3_epi8(a[1]);  // [digit-3 state | digit-4 state: values 64..79]
  // 8-byte stage: digit n of byte m is value 80 + 8n + m.
  const __m128i s = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(x.qs + 16));
  const __m128i s3 = mul3_epi8(s), s9 = mul3_epi8(s3), s27 = mul3_epi8(s9), s81 = mul3_epi8(s27);
  a[2] = join128(_mm256_extracti128_si256(b[1], 1), _mm_unpacklo_epi64(s, s3));  // 64..79 | 80..95
  b[2] = mul3_epi8(a[2]);
  // qh: digit n of qh[h] is value 120 + 2n + h; 16-bit lane n of hv holds (qh[0], qh[1]) * 3^n.
  const __m128i hv = _mm_unpacklo_epi8(_mm_cvtsi32_si128(int32_t(kPow3.v[x.qh[0]])),
                                       _mm_cvtsi32_si128(int32_t(kPow3.v[x.qh[1]])));
  a[3] = join128(_mm_unpacklo_epi64(s9, s27), _mm_unpacklo_epi64(s81, hv));  // 96..111 | 112..127
  b[3] = mul3_epi8(a[3]);
}

// Software prefetch of the weights kPf = kTernaryPrefetchBytes (4 KiB) ahead of the block being read (into
// the rows the thread reads next: its rows are consecutive). Why: without it one core streamed TQ2_0
// from DRAM at 5.5..6.1 GB/s against 14.3 from L2 and 8.3..9.3 for a plain read loop, i.e. the memory
// time and the arithmetic did not overlap (the out-of-order window, ~45 instructions per 64 bytes of
// weights, holds too few cache misses, and the hardware prefetchers did not make up for it). With
// 4 KiB: 9.8..10.1 GB/s, TQ1_0 4.6 -> 6.0..6.2 (about its L2 figure), PTQ1_0 2.95 -> 3.2; the
// L2-resident figures unchanged (one core, thread CPU time; 1 and 2 KiB gave less, 8 KiB no more).
// A compile-time distance (a kernel template parameter; 0 = none, the old kernels): a run-time one cost
// a register, and the 4-token TQ1_0 kernel lost 35 % on L2-resident rows to the spills that followed.
template <int kPf>
inline void prefetch_ahead(const void* p) {
  if constexpr (kPf > 0) _mm_prefetch(static_cast<const char*>(p) + kPf, _MM_HINT_T0);
}

// Codes of a block from its states: u[g] = digit0(a[g]).
template <typename Ops, int G>
inline void codes_from_states(const __m256i a[G], __m256i u[G]) {
#pragma GCC unroll 8
  for (int g = 0; g < G; ++g) u[g] = Ops::digit0(a[g]);
}

// Exact Σ code * s per int32 lane from the two state products (see states_tq1_0).
inline __m256i state_lanes(__m256i sa, __m256i sb) {
  return _mm256_srai_epi32(_mm256_sub_epi32(_mm256_add_epi32(sa, _mm256_add_epi32(sa, sa)), sb), 8);
}

// Whether a kernel of Ops for NT tokens multiplies states (two products per 32 values and token, no
// decode) rather than codes (a decode per block, one product per token). Measured on one core (GB/s,
// states against codes): 1 token 6.7 / 5.3, 2 tokens 4.6 / 4.4, 3 tokens 3.6 / 3.8.
template <typename Ops, int NT>
constexpr bool use_states() {
  return Ops::kStateDot && NT <= 2;
}

// Σ code * q - corr per int32 lane over G groups of 32 values (codes u[g], or states u[g] and sb[g]
// when kStates) against the activation bytes q[0 .. 32G); corr = the activation sums (Σ q of each
// lane's values), which turn Σ code * q into Σ t * q, and corr256 = 256 * corr (the caller may form it
// for free, e.g. a madd of the int16 bsums by 256: |.| <= 2 * 2032 * 256 < 2^31). The correction starts
// a product chain (kStates: corr256 in the sb chain, so that (3 SA - SB) / 256 comes out corrected,
// exactly) instead of a zero and a subtraction. Two independent product chains per sum (even / odd
// groups), so that the latency of one block's chain does not limit how many blocks are in flight;
// integer sums: order-free, and the states give the same lanes as the codes.
template <typename Ops, bool kStates, int G>
inline __m256i code_lanes(const __m256i u[G], const __m256i sb[G], const int8_t* q, __m256i corr,
                          __m256i corr256) {
  if constexpr (kStates && G <= 4) {  // PTQ1_0: one chain each (the two products already make two chains);
    // measured one core: 4.21 -> 4.31 GB/s at 1 token, 3.02 -> 3.13 at 2; TQ1_0 (G = 8) lost 3 % this way
    __m256i sa = _mm256_setzero_si256(), sbb = corr256;
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) {
      const __m256i s = load256(q + 32 * g);
      sa = Ops::dot_u8s8(sa, u[g], s);
      sbb = Ops::dot_u8s8(sbb, sb[g], s);
    }
    return state_lanes(sa, sbb);
  } else if constexpr (kStates) {
    __m256i sa[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    __m256i sbb[2] = {corr256, _mm256_setzero_si256()};
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) {
      const __m256i s = load256(q + 32 * g);
      sa[g & 1] = Ops::dot_u8s8(sa[g & 1], u[g], s);
      sbb[g & 1] = Ops::dot_u8s8(sbb[g & 1], sb[g], s);
    }
    return state_lanes(_mm256_add_epi32(sa[0], sa[1]), _mm256_add_epi32(sbb[0], sbb[1]));
  } else {
    __m256i sa[2] = {_mm256_sub_epi32(_mm256_setzero_si256(), corr), _mm256_setzero_si256()};
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) sa[g & 1] = Ops::dot_u8s8(sa[g & 1], u[g], load256(q + 32 * g));
    return _mm256_add_epi32(sa[0], sa[1]);
  }
}

// TQ1_0 / TQ2_0 against Q8_K activations.
template <typename Ops, DType kType, int kPf>
struct TernaryQ8K {
  using Block = std::conditional_t<kType == DType::TQ1_0, BlockTQ1_0, BlockTQ2_0>;
  template <int NT>
  static void run(const void* w_row, const ActRow* a, int64_t n, float* out) {
    const Block* w = static_cast<const Block*>(w_row);
    const __m256i ones16 = _mm256_set1_epi16(1), k256 = _mm256_set1_epi16(256);
    __m256 acc[NT];
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
    constexpr bool kStates = kType == DType::TQ1_0 && use_states<Ops, NT>();
    __m256i u[8], sb[8];
    // TQ1_0 decode kernels (3..8 tokens) without the prefetch: with it their L2-resident throughput
    // fell from 3.3 to 2.06 GB/s at 4 tokens whatever the distance (2..6 KiB) or hint (T0, T1, NTA),
    // and from DRAM too (2.5..2.9 -> 1.3..2.1); not understood (code layout?), measured only.
    constexpr int kPfNT = kType == DType::TQ1_0 && NT > 2 ? 0 : kPf;
    for (int64_t b = 0; b < n / 256; ++b) {
      prefetch_ahead<kPfNT>(w + b);
      if constexpr (kType == DType::TQ1_0) {
        states_tq1_0<Ops>(w[b], u, sb);
        if constexpr (!kStates) codes_from_states<Ops, 8>(u, u);
      } else {
        unpack_tq2_0(w[b], u);
      }
      const float d = half_to_f32(w[b].d);
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) {
        const int8_t* q = a[t].qs + b * 256;
        __m256i isum;
        if constexpr (kStates) {
          isum = code_lanes<Ops, kStates, 8>(u, sb, q, _mm256_madd_epi16(load256(a[t].bsums + 16 * b), ones16),
                                             _mm256_madd_epi16(load256(a[t].bsums + 16 * b), k256));
        } else {  // (as before 2026-12-01f: through code_lanes this path ran 35 % slower with 4 tokens)
          __m256i sa[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
#pragma GCC unroll 8
          for (int g = 0; g < 8; ++g) sa[g & 1] = Ops::dot_u8s8(sa[g & 1], u[g], load256(q + 32 * g));
          isum = _mm256_add_epi32(sa[0], sa[1]);
          isum = _mm256_sub_epi32(isum, _mm256_madd_epi16(load256(a[t].bsums + 16 * b), ones16));
        }
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(d * a[t].d[b]), acc[t]);
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) out[t] = hsum_ps(acc[t]);
  }
};

// PTQ1_0 against Q8_K activations (rows of whole 256s, act_format(PTQ1_0, n_in)): a weight block is
// half an activation block, so per block and token one integer sum of 8 lanes, corrected by its 8
// activation bsums and scaled by d * d_act with one FMA, as TQ1_0 (states for 1..2 tokens on VNNI).
// Against Q8_32 this removes the per-32 reduction (three vphaddd) and scaling.
template <typename Ops, int kPf>
struct Ptq1Q8K {
  template <int NT>
  static void run(const BlockPTQ1_0* w, const ActRow* a, int64_t n, float* out) {
    __m256 acc[NT];
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
    constexpr bool kStates = use_states<Ops, NT>();
    __m256i u[4], sb[4];
    for (int64_t b = 0; b < n / kQK_PTQ1_0; ++b) {
      if (b % 2 == 0) prefetch_ahead<kPf>(w + b);
      states_ptq1_0(w[b], u, sb);
      if constexpr (!kStates) codes_from_states<Ops, 4>(u, u);
      const float d = half_to_f32(w[b].d);
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) {
        const __m256i corr = _mm256_cvtepi16_epi32(load128(a[t].bsums + 8 * b));
        const __m256i isum =
            code_lanes<Ops, kStates, 4>(u, sb, a[t].qs + b * kQK_PTQ1_0, corr, _mm256_slli_epi32(corr, 8));
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(d * a[t].d[b / 2]), acc[t]);
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) out[t] = hsum_ps(acc[t]);
  }
};

// PTQ1_0 against Q8_32 activations (rows not a whole number of 256 values; the others go to Ptq1Q8K) (blocks of 32: four per weight block). Per block and token the
// four integer sums are gathered into one int32x4 (horizontal adds), corrected by the activation sums,
// scaled by the four activation scales and added to the token's f32x4 accumulator with one FMA.
template <typename Ops, int kPf>
struct Ptq1Q8_32 {
  template <int NT>
  static void run(const void* w_row, const ActRow* a, int64_t n, float* out) {
    if (ptq1_0_reads_q8_K(n)) return run_q8_K<NT>(w_row, a, n, out);
    const BlockPTQ1_0* w = static_cast<const BlockPTQ1_0*>(w_row);
    __m128 acc[NT];
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) acc[t] = _mm_setzero_ps();
    // Decode, not states: with a scale per 32 values the two state sums need their own reductions,
    // which cost more than the decode saves (measured: 2.66 against 2.85 GB/s on one core). The state
    // branch stays compiled out; removing it and the unused b[] changed the inlining and cost 7 %.
    constexpr bool kStates = false;
    __m256i u[4], sb[4];
    for (int64_t b = 0; b < n / kQK_PTQ1_0; ++b) {
      if (b % 2 == 0) prefetch_ahead<kPf>(w + b);
      states_ptq1_0(w[b], u, sb);
      if constexpr (!kStates) codes_from_states<Ops, 4>(u, u);
      const __m128 d = _mm_set1_ps(half_to_f32(w[b].d));
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) {
        const int8_t* q = a[t].qs + b * kQK_PTQ1_0;
        const __m256i zero = _mm256_setzero_si256();
        __m256i g[4];
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) {
          const __m256i s = load256(q + 32 * k);
          g[k] = Ops::dot_u8s8(zero, u[k], s);
          if constexpr (kStates) g[k] = state_lanes(g[k], Ops::dot_u8s8(zero, sb[k], s));
        }
        const __m256i p = _mm256_hadd_epi32(_mm256_hadd_epi32(g[0], g[1]), _mm256_hadd_epi32(g[2], g[3]));
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
  template <int NT>
  static void run_q8_K(const void* w_row, const ActRow* a, int64_t n, float* out) {
    Ptq1Q8K<Ops, kPf>::template run<NT>(static_cast<const BlockPTQ1_0*>(w_row), a, n, out);
  }
};

template <typename Ops, int kPf>
RowDotFn ternary_kernel_pf(DType type) {
  switch (type) {
    case DType::TQ1_0: return by_tokens<TernaryQ8K<Ops, DType::TQ1_0, kPf>>;
    case DType::TQ2_0: return by_tokens<TernaryQ8K<Ops, DType::TQ2_0, kPf>>;
    case DType::PTQ1_0: return by_tokens<Ptq1Q8_32<Ops, kPf>>;
    default: return nullptr;
  }
}

// The kernels for `type`, or nullptr; without the prefetch when ternary_old_kernels().
template <typename Ops>
RowDotFn ternary_kernel(DType type) {
  switch (type) {
    case DType::TQ1_0: case DType::TQ2_0: case DType::PTQ1_0:
      return ternary_old_kernels() ? ternary_kernel_pf<Ops, 0>(type)
                                   : ternary_kernel_pf<Ops, kTernaryPrefetchBytes>(type);
    default: return nullptr;
  }
}

}  // namespace
}  // namespace polykv::cpu
