// AVX-512 VNNI group kernel for q6_K in the x16 packed layout (packed_q6k.h): 16 rows x NT <= 8 tokens in
// one pass, the steps of the AVX2 kernel (packed_kquant_avx2.h, Q6KHalf) on whole 64-byte vectors. Per
// super-block and scale (16 values: sub-block s, chunks c0 .. c0 + 3), the 4 chunk vectors of the 16 rows
// are unpacked once (low 4 bits from ql, high 2 bits from qh: u = 0..63) and meet each token's 4-byte
// activation chunks broadcast (vpdpbusd); that partial times the row's scale (int8, sign-extended) goes into
// the token's integer sum. After the super-block: isum -= 32 * Σ_k sc[k] * bsum[k] (vpdpwssd with (sc, sc')
// int16 pairs), then acc = fma(float(isum), d * da, acc). The integer sums are exact (|isum| < 2^28), so the
// results are the scalar group kernel's (packed_dot_q6_K_scalar) bit for bit, whatever tokens share a call.
// gcc 12's own avx512fintrin.h trips -Wuninitialized on its _mm512_undefined_* helpers (a known
// false positive in the compiler headers, not in this file).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/packed_q6k.h"
#include "backend/cpu/packed_weights.h"

namespace polykv::cpu {
namespace {

inline __m512i bcast_u32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// vpshufb control that applies the byte pattern `pat` (indices 0..3, or 0x80 for zero) to every 32-bit
// lane within that lane (vpshufb indexes the 16 bytes of its 128-bit quarter).
inline __m512i lane_pattern(uint32_t pat) {
  return _mm512_add_epi8(_mm512_set1_epi32(int32_t(pat)), _mm512_set4_epi32(0x0C0C0C0C, 0x08080808, 0x04040404, 0));
}

template <int NT>
void q6_K_group(const PackedMatrix& p, int64_t g, const ActRow* act, float* y, int64_t ldy) {
  const __m512i lo4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
  __m512 acc[NT];
#pragma GCC unroll 8
  for (auto& v : acc) v = _mm512_setzero_ps();
  for (int64_t b = 0; b < p.n_blocks(); ++b) {
    const uint8_t* rec = p.qs_at(g, b);
    // Every line of the record two records ahead (the q4_K kernel's distance; a prefetch past the matrix
    // does not fault).
#pragma GCC unroll 53
    for (size_t o = 0; o < kQ6KRecordBytes; o += 64)
      _mm_prefetch(reinterpret_cast<const char*>(rec) + 2 * kQ6KRecordBytes + o, _MM_HINT_T0);
    __m512i sv[4];  // scales: vector v, lane r = scales[4v .. 4v + 3] of row r (int8)
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) sv[v] = _mm512_load_si512(rec + kQ6KScalesOffset + 64 * v);
    __m512i isum[NT];
#pragma GCC unroll 8
    for (auto& v : isum) v = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) {
      const int hh = s / 4, k = s % 4;
      const uint8_t* lov = rec + (16 * hh + 8 * (k & 1)) * 64;  // ql vectors of sub-block s (nibble k >> 1)
      const uint8_t* hiv = rec + kQ6KQhOffset + 8 * hh * 64;     // qh vectors (bits 2k, 2k + 1)
#pragma GCC unroll 2
      for (int c0 = 0; c0 < 8; c0 += 4) {
        const int ks = 2 * s + c0 / 4;  // this scale's index: byte ks % 4 of vector ks / 4, sign-extended
        const __m512i sc = _mm512_srai_epi32(_mm512_slli_epi32(sv[ks / 4], 24 - 8 * (ks % 4)), 24);
        __m512i u[4];
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) {
          const __m512i l = _mm512_load_si512(lov + 64 * (c0 + c)), hq = _mm512_load_si512(hiv + 64 * (c0 + c));
          const __m512i lo = _mm512_and_si512(k >> 1 ? _mm512_srli_epi16(l, 4) : l, lo4);
          const __m512i hs = k == 0   ? _mm512_slli_epi16(hq, 4)
                             : k == 1 ? _mm512_slli_epi16(hq, 2)
                             : k == 2 ? hq
                                      : _mm512_srli_epi16(hq, 2);  // bits 2k, 2k + 1 to bits 4, 5
          u[c] = _mm512_or_si512(lo, _mm512_and_si512(hs, m30));
        }
#pragma GCC unroll 8
        for (int t = 0; t < NT; ++t) {
          const int8_t* q = act[t].qs + 256 * b + 32 * s + 4 * c0;
          __m512i part = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[0], bcast_u32(q));
          part = _mm512_dpbusd_epi32(part, u[1], bcast_u32(q + 4));
          part = _mm512_dpbusd_epi32(part, u[2], bcast_u32(q + 8));
          part = _mm512_dpbusd_epi32(part, u[3], bcast_u32(q + 12));
          isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(part, sc));
        }
      }
    }
    __m512i scpair[8];  // (scale 2i, scale 2i + 1) as sign-extended int16 pairs
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      const uint32_t lo = 2 * (i % 2), hi = lo + 1;
      scpair[i] = _mm512_srai_epi16(_mm512_shuffle_epi8(sv[i / 2], lane_pattern(0x0080'0080u | hi << 24 | lo << 8)), 8);
    }
    const __m512 d = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(rec + kQ6KDOffset)));
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) {
      const int16_t* bs = act[t].bsums + 16 * b;
      __m512i corr = _mm512_setzero_si512();  // Σ_k sc[k] * bsum[k]
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) corr = _mm512_dpwssd_epi32(corr, scpair[i], bcast_u32(bs + 2 * i));
      const __m512i is = _mm512_sub_epi32(isum[t], _mm512_slli_epi32(corr, 5));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), _mm512_mul_ps(d, _mm512_set1_ps(act[t].d[b])), acc[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < NT; ++t) _mm512_storeu_ps(y + t * ldy, acc[t]);
}

void q6_K_packed(const PackedMatrix& p, int64_t g, const ActRow* act, int n_tok, float* y, int64_t ldy) {
  switch (n_tok) {
    case 1: q6_K_group<1>(p, g, act, y, ldy); break;
    case 2: q6_K_group<2>(p, g, act, y, ldy); break;
    case 3: q6_K_group<3>(p, g, act, y, ldy); break;
    case 4: q6_K_group<4>(p, g, act, y, ldy); break;
    case 5: q6_K_group<5>(p, g, act, y, ldy); break;
    case 6: q6_K_group<6>(p, g, act, y, ldy); break;
    case 7: q6_K_group<7>(p, g, act, y, ldy); break;
    default: q6_K_group<8>(p, g, act, y, ldy); break;
  }
}
static_assert(kMaxPackedTokens == 8, "q6_K_packed handles 1..8 tokens");

}  // namespace

PackedDotFn packed_dot_q6_K_avx512() { return q6_K_packed; }

}  // namespace polykv::cpu
