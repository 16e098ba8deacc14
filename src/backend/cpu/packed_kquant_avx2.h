// AVX2 group kernels for the k-quant x16 packed layouts (q4_K, q5_K: packed_q4k.h, q6_K: packed_q6k.h),
// shared by packed_kernels_avx2.cpp (vpmaddubsw) and packed_kernels_avxvnni.cpp (AVX-VNNI vpdpbusd)
// through the same integer policy `Dot` as the q4_0/q8_0 kernels (packed_kernels_avx2.h). Include only
// from that header (internal linkage, each TU compiled for its own ISA).
//
// Structure (as for q4_0/q8_0): a 64-byte vector of a record is two ymm halves, rows 0..7 and 8..15;
// a call runs each half in turn for up to 4 tokens. Per super-block and sub-block, each chunk vector
// (lane r = 4 quants of row r, unpacked to unsigned bytes) is unpacked once and meets the 4 tokens'
// activation chunks broadcast to every lane. So prefill is a register-tiled GEMM (8 rows x 4 tokens)
// over activations quantized once per matmul, and decode reads each weight byte once.
//
// Dot policy, k-quant part:
//   kq_dot(s, u, a)          partial sum of u (unsigned, <= 63) times a (signed, |a| <= 127) per row
//                            lane; maddubs: int16 pairs in 16-bit lanes, VNNI: int32 lanes
//   kq_prep_scale(sc32)      the per-row scale (int32 lanes) in the form kq_apply needs
//   kq_apply(isum, s, sc)    isum + s * sc per int32 lane (s from kq_dot, exact)
//   madd_acc(acc, a, b)      acc + vpmaddwd(a, b)
//   kQ6Flush, kQ5Flush       chunks of q6_K (u <= 63) resp. q5_K (u <= 31) one partial sum may take:
//                            the int16 partials of the maddubs policy stay below 2^15 for 2
//                            (2 * 2 * 63 * 127 = 32004) resp. 4 (4 * 2 * 31 * 127 = 31496); q4_K
//                            (u <= 15) flushes once per 8 chunks (8 * 2 * 15 * 127 = 30480).
// The integer sums per (row, token, super-block) are exact, hence equal for both policies, and the
// float steps are those of the scalar references, in the same order: AVX2 results equal the scalar
// group kernels' bit for bit (and so, for q4_K, the AVX-512 kernel's), whatever tokens share a call.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/packed_q4k.h"
#include "backend/cpu/packed_q6k.h"
#include "backend/cpu/packed_weights.h"

namespace polykv::cpu {
namespace {

[[gnu::always_inline]] inline __m256i kq_bcast(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}
[[gnu::always_inline]] inline __m256i kq_load(const uint8_t* p) {
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(p));
}
// vpshufb control that applies the byte pattern `pat` (indices 0..3, or 0x80 for zero) to every
// 32-bit lane within that lane (vpshufb indexes the 16 bytes of its 128-bit half).
[[gnu::always_inline]] inline __m256i kq_lane_pattern(uint32_t pat) {
  return _mm256_add_epi8(_mm256_set1_epi32(int32_t(pat)),
                         _mm256_setr_epi32(0, 0x04040404, 0x08080808, 0x0C0C0C0C, 0, 0x04040404, 0x08080808, 0x0C0C0C0C));
}
[[gnu::always_inline]] inline __m256 kq_half_fp16(const uint8_t* p) {  // 8 fp16 -> f32
  return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(p)));
}

// Software prefetch of the record pf bytes ahead (POLYKV_PACKED_PF, 0: none; default 2 records, as the
// AVX-512 q4_K kernel), issued by the first half's pass only (the second re-reads the group from cache),
// spread over the 8 sub-blocks: step j of 8 prefetches lines [j * L / 8, (j + 1) * L / 8) of the L lines.
template <size_t kRecord>
ptrdiff_t kq_prefetch_bytes() {
  static const ptrdiff_t pf = packed_prefetch_env(ptrdiff_t(2 * kRecord));
  return pf;
}
template <size_t kRecord>
[[gnu::always_inline]] inline void kq_prefetch_step(const uint8_t* rec, ptrdiff_t pf, int j) {
  constexpr int kLines = int((kRecord + 63) / 64);
#pragma GCC unroll 8
  for (int o = j * kLines / 8; o < (j + 1) * kLines / 8; ++o)
    _mm_prefetch(reinterpret_cast<const char*>(rec) + pf + 64 * o, _MM_HINT_T0);
}

// q4_K (kFive = false) or q5_K, rows 8h .. 8h+7 of group g against NT <= 4 tokens.
template <typename Dot, bool kFive>
struct K45Half {
  template <int NT>
  [[gnu::always_inline]] static inline void run(const PackedMatrix& p, int64_t g, int h, const ActRow* act, float* y,
                                                int64_t ldy) {
    using L = K45Layout<kFive>;
    constexpr int F = kFive ? Dot::kQ5Flush : 8;  // chunks per partial sum
    static_assert(8 % F == 0);
    const __m256i lo4 = _mm256_set1_epi8(0x0F), m6 = _mm256_set1_epi8(0x3F), m30 = _mm256_set1_epi8(0x30);
    // shuffle_epi8 patterns: lane bytes (0, 1) resp. (2, 3) zero-extended to two int16.
    const __m256i pair01 = kq_lane_pattern(0x8001'8000u), pair23 = kq_lane_pattern(0x8003'8002u);
    __m256 acc[NT];
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
    const ptrdiff_t pf = h == 0 ? kq_prefetch_bytes<L::kRecord>() : 0;
    for (int64_t b = 0; b < p.n_blocks(); ++b) {
      const uint8_t* rec = p.qs_at(g, b);
      const uint8_t* half = rec + 32 * h;
      // Scales and mins of the 8 rows (kernel_kquant_scales.h unpack_scales_mins_k4, 4 bytes a lane).
      const __m256i s0 = kq_load(half + L::kScales), s1 = kq_load(half + L::kScales + 64),
                    s2 = kq_load(half + L::kScales + 128);
      const __m256i sc_lo = _mm256_and_si256(s0, m6);
      const __m256i sc_hi = _mm256_or_si256(_mm256_and_si256(s2, lo4), _mm256_and_si256(_mm256_srli_epi32(s0, 2), m30));
      __m256i scp[8];  // scale of sub-block j, lane r = row r
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const __m256i ff = _mm256_set1_epi32(0xFF);
        scp[k] = Dot::kq_prep_scale(_mm256_and_si256(_mm256_srli_epi32(sc_lo, 8 * k), ff));
        scp[4 + k] = Dot::kq_prep_scale(_mm256_and_si256(_mm256_srli_epi32(sc_hi, 8 * k), ff));
      }
      __m256i isum[NT];
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
        if (pf != 0) kq_prefetch_step<L::kRecord>(rec, pf, j);
        const uint8_t* qv = half + (j / 2) * 512;
#pragma GCC unroll 8
        for (int c0 = 0; c0 < 8; c0 += F) {
          __m256i s[NT];
#pragma GCC unroll 4
          for (int t = 0; t < NT; ++t) s[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
          for (int c = c0; c < c0 + F; ++c) {
            const __m256i raw = kq_load(qv + 64 * c);
            __m256i u = _mm256_and_si256(j % 2 ? _mm256_srli_epi16(raw, 4) : raw, lo4);
            if constexpr (kFive) {  // bit j of the qh bytes to bit 4
              const __m256i qh = kq_load(half + kQ5KQhOffset + 64 * c);
              const __m256i at4 = j < 4 ? _mm256_slli_epi16(qh, 4 - j) : j == 4 ? qh : _mm256_srli_epi16(qh, j - 4);
              u = _mm256_or_si256(u, _mm256_and_si256(at4, _mm256_set1_epi8(0x10)));
            }
#pragma GCC unroll 4
            for (int t = 0; t < NT; ++t) s[t] = Dot::kq_dot(s[t], u, kq_bcast(act[t].qs + 256 * b + 32 * j + 4 * c));
          }
#pragma GCC unroll 4
          for (int t = 0; t < NT; ++t) isum[t] = Dot::kq_apply(isum[t], s[t], scp[j]);
        }
      }
      // Mins as int16 pairs (m0, m1), (m2, m3), (m4, m5), (m6, m7) per lane.
      const __m256i m_lo = _mm256_and_si256(s1, m6);
      const __m256i m_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(s2, 4), lo4),
                                           _mm256_and_si256(_mm256_srli_epi32(s1, 2), m30));
      const __m256i mp0 = _mm256_shuffle_epi8(m_lo, pair01), mp1 = _mm256_shuffle_epi8(m_lo, pair23);
      const __m256i mp2 = _mm256_shuffle_epi8(m_hi, pair01), mp3 = _mm256_shuffle_epi8(m_hi, pair23);
      const __m256 d = kq_half_fp16(rec + L::kD + 16 * h), dmin = kq_half_fp16(rec + L::kDmin + 16 * h);
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) {
        // B[j] = bsum[2j] + bsum[2j+1] (|B| <= 32 * 127): int32 [B0..B3 | B4..B7], then int16 pairs.
        const __m256i b32 = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(act[t].bsums + 16 * b)),
                                              _mm256_set1_epi16(1));
        const __m256i b16 = _mm256_packs_epi32(b32, b32);  // dwords 0, 1, 4, 5: (B0,B1) (B2,B3) (B4,B5) (B6,B7)
        __m256i msum = _mm256_madd_epi16(mp0, _mm256_permutevar8x32_epi32(b16, _mm256_set1_epi32(0)));
        msum = Dot::madd_acc(msum, mp1, _mm256_permutevar8x32_epi32(b16, _mm256_set1_epi32(1)));
        msum = Dot::madd_acc(msum, mp2, _mm256_permutevar8x32_epi32(b16, _mm256_set1_epi32(4)));
        msum = Dot::madd_acc(msum, mp3, _mm256_permutevar8x32_epi32(b16, _mm256_set1_epi32(5)));
        const __m256 da = _mm256_set1_ps(act[t].d[b]);
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(d, da), acc[t]);
        acc[t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_mul_ps(dmin, da), acc[t]);
      }
    }
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) _mm256_storeu_ps(y + t * ldy + 8 * h, acc[t]);
  }
};

template <typename Dot>
using Q4KHalf = K45Half<Dot, false>;
template <typename Dot>
using Q5KHalf = K45Half<Dot, true>;

// q6_K, rows 8h .. 8h+7 of group g against NT <= 4 tokens.
template <typename Dot>
struct Q6KHalf {
  template <int NT>
  [[gnu::always_inline]] static inline void run(const PackedMatrix& p, int64_t g, int h, const ActRow* act, float* y,
                                                int64_t ldy) {
    constexpr int F = Dot::kQ6Flush;
    static_assert(4 % F == 0);
    const __m256i lo4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    __m256 acc[NT];
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
    const ptrdiff_t pf = h == 0 ? kq_prefetch_bytes<kQ6KRecordBytes>() : 0;
    for (int64_t b = 0; b < p.n_blocks(); ++b) {
      const uint8_t* rec = p.qs_at(g, b);
      const uint8_t* half = rec + 32 * h;
      __m256i sv[4], scp[16], scpair[8];
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) sv[v] = kq_load(half + kQ6KScalesOffset + 64 * v);
#pragma GCC unroll 16
      for (int k = 0; k < 16; ++k)  // scale k (int8, byte k % 4 of vector k / 4) sign-extended
        scp[k] = Dot::kq_prep_scale(_mm256_srai_epi32(_mm256_slli_epi32(sv[k / 4], 24 - 8 * (k % 4)), 24));
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {  // (scale 2i, scale 2i+1) as sign-extended int16 pair
        const int lo = 2 * (i % 2), hi = lo + 1;
        const __m256i pat = kq_lane_pattern(0x0080'0080u | uint32_t(hi) << 24 | uint32_t(lo) << 8);
        scpair[i] = _mm256_srai_epi16(_mm256_shuffle_epi8(sv[i / 2], pat), 8);
      }
      __m256i isum[NT];
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int s = 0; s < 8; ++s) {
        if (pf != 0) kq_prefetch_step<kQ6KRecordBytes>(rec, pf, s);
        const int hh = s / 4, k = s % 4;
        const uint8_t* lov = half + (16 * hh + 8 * (k & 1)) * 64;
        const uint8_t* hiv = half + kQ6KQhOffset + 8 * hh * 64;
#pragma GCC unroll 8
        for (int c0 = 0; c0 < 8; c0 += F) {
          __m256i part[NT];
#pragma GCC unroll 4
          for (int t = 0; t < NT; ++t) part[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
          for (int c = c0; c < c0 + F; ++c) {
            const __m256i l = kq_load(lov + 64 * c), hq = kq_load(hiv + 64 * c);
            const __m256i lo = _mm256_and_si256(k >> 1 ? _mm256_srli_epi16(l, 4) : l, lo4);
            // bits 2k, 2k+1 of hq to bits 4, 5
            const __m256i hs = k == 0   ? _mm256_slli_epi16(hq, 4)
                               : k == 1 ? _mm256_slli_epi16(hq, 2)
                               : k == 2 ? hq
                                        : _mm256_srli_epi16(hq, 2);
            const __m256i u = _mm256_or_si256(lo, _mm256_and_si256(hs, m30));
#pragma GCC unroll 4
            for (int t = 0; t < NT; ++t) part[t] = Dot::kq_dot(part[t], u, kq_bcast(act[t].qs + 256 * b + 32 * s + 4 * c));
          }
#pragma GCC unroll 4
          for (int t = 0; t < NT; ++t) isum[t] = Dot::kq_apply(isum[t], part[t], scp[2 * s + c0 / 4]);
        }
      }
      const __m256 d = kq_half_fp16(rec + kQ6KDOffset + 16 * h);
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) {
        const int16_t* bs = act[t].bsums + 16 * b;
        __m256i corr = _mm256_madd_epi16(scpair[0], kq_bcast(bs));  // Σ_k sc[k] * bsum[k]
#pragma GCC unroll 8
        for (int i = 1; i < 8; ++i) corr = Dot::madd_acc(corr, scpair[i], kq_bcast(bs + 2 * i));
        isum[t] = _mm256_sub_epi32(isum[t], _mm256_slli_epi32(corr, 5));
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(d, _mm256_set1_ps(act[t].d[b])), acc[t]);
      }
    }
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) _mm256_storeu_ps(y + t * ldy + 8 * h, acc[t]);
  }
};

// PackedDotFn for a k-quant: 1..8 tokens as passes of at most 4, each pass both halves (each token's
// arithmetic is the same in any pass).
template <template <typename> class Half, typename Dot, int NT>
void kq_pass(const PackedMatrix& p, int64_t g, const ActRow* act, float* y, int64_t ldy) {
  Half<Dot>::template run<NT>(p, g, 0, act, y, ldy);
  Half<Dot>::template run<NT>(p, g, 1, act, y, ldy);
}

template <template <typename> class Half, typename Dot>
void kq_packed_group(const PackedMatrix& p, int64_t g, const ActRow* act, int n_tok, float* y, int64_t ldy) {
  for (int t = 0; t < n_tok; t += 4) {
    const ActRow* a = act + t;
    float* yt = y + t * ldy;
    switch (std::min(4, n_tok - t)) {
      case 1: kq_pass<Half, Dot, 1>(p, g, a, yt, ldy); break;
      case 2: kq_pass<Half, Dot, 2>(p, g, a, yt, ldy); break;
      case 3: kq_pass<Half, Dot, 3>(p, g, a, yt, ldy); break;
      default: kq_pass<Half, Dot, 4>(p, g, a, yt, ldy); break;
    }
  }
}
static_assert(kMaxPackedTokens == 8);

}  // namespace
}  // namespace polykv::cpu
