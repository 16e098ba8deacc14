// AVX-512 VNNI group kernel for q4_K in the x16 packed layout (packed_q4k.h): 16 rows × NT tokens,
// each super-block's quants unpacked once per sub-block and used by all NT tokens (what a verify
// step of k <= 8 tokens needs: the weights are read and unpacked once for the k columns).
//
// Per super-block: the 6-bit scales / mins of the 16 rows are decoded with byte ops into four
// vectors (lane r = 4 bytes: sc0..3, sc4..7, m0..3, m4..7 of row r). Per sub-block j (32 values): 8
// vectors of unsigned nibbles (chunk c = values 4c..4c+3 of the 16 rows); per token, 8 vpdpbusd with
// the token's 4-byte chunks broadcast give Σ u·q per row in the 16 int32 lanes, multiplied by sc[j]
// (vpmulld) into the token's integer sum; the mins term Σ m[j] * (bsum[2j] + bsum[2j+1]) is one
// vpdpwssd per sub-block with (m[j], m[j]) as int16 pairs against the token's two bsums as a dword.
// Then per token the two float steps of packed_q4k.h. Loops are unrolled so that the nibble vectors
// and the integer sums stay in zmm registers.
// gcc 12's own avx512fintrin.h trips -Wuninitialized on its _mm512_undefined_* helpers (a known
// false positive in the compiler headers, not in this file).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstddef>
#include <cstring>

#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/packed_q4k.h"
#include "backend/cpu/packed_weights.h"

namespace polykv::cpu {
namespace {

inline __m512i bcast_u32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// Byte k (0..3) of every 32-bit lane of v, zero-extended to the lane.
template <int k>
inline __m512i byte_of(__m512i v) {
  return _mm512_and_si512(_mm512_srli_epi32(v, 8 * k), _mm512_set1_epi32(0xFF));
}

template <int NT>
void q4_K_group(const PackedMatrix& p, int64_t g, const ActRow* act, float* y, int64_t ldy) {
  const int64_t nb = p.n_blocks();
  __m512 acc[NT];
#pragma GCC unroll 8
  for (auto& v : acc) v = _mm512_setzero_ps();
  const __m512i lo4 = _mm512_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* rec = p.qs_at(g, b);
    // Scales and mins of the 16 rows (kernel_kquant_scales.h unpack_scales_mins_k4, 4 bytes a lane).
    const __m512i s0 = _mm512_load_si512(rec + kQ4KScalesOffset);
    const __m512i s1 = _mm512_load_si512(rec + kQ4KScalesOffset + 64);
    const __m512i s2 = _mm512_load_si512(rec + kQ4KScalesOffset + 128);
    const __m512i m6 = _mm512_set1_epi8(0x3F), m30 = _mm512_set1_epi8(0x30);
    const __m512i sc_lo = _mm512_and_si512(s0, m6);
    const __m512i m_lo = _mm512_and_si512(s1, m6);
    const __m512i sc_hi = _mm512_or_si512(_mm512_and_si512(s2, lo4), _mm512_and_si512(_mm512_srli_epi32(s0, 2), m30));
    const __m512i m_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(s2, 4), lo4),
                                         _mm512_and_si512(_mm512_srli_epi32(s1, 2), m30));
    __m512i isum[NT], msum[NT];
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) isum[t] = msum[t] = _mm512_setzero_si512();
    auto sub_block = [&](int j, __m512i sc32, __m512i m32) __attribute__((always_inline)) {
      const __m512i m_pair = _mm512_or_si512(m32, _mm512_slli_epi32(m32, 16));  // (m, m) as int16
      const uint8_t* qv = rec + (j / 2) * 512;
      __m512i w[8];
#pragma GCC unroll 8
      for (int c = 0; c < 8; ++c) {
        const __m512i raw = _mm512_load_si512(qv + 64 * c);
        w[c] = _mm512_and_si512(j % 2 ? _mm512_srli_epi16(raw, 4) : raw, lo4);
      }
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) {
        const int8_t* q = act[t].qs + 256 * b + 32 * j;
        __m512i s = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int c = 0; c < 8; ++c) s = _mm512_dpbusd_epi32(s, w[c], bcast_u32(q + 4 * c));
        isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(s, sc32));
        msum[t] = _mm512_dpwssd_epi32(msum[t], m_pair, bcast_u32(act[t].bsums + 16 * b + 2 * j));
      }
    };
    sub_block(0, byte_of<0>(sc_lo), byte_of<0>(m_lo));
    sub_block(1, byte_of<1>(sc_lo), byte_of<1>(m_lo));
    sub_block(2, byte_of<2>(sc_lo), byte_of<2>(m_lo));
    sub_block(3, byte_of<3>(sc_lo), byte_of<3>(m_lo));
    sub_block(4, byte_of<0>(sc_hi), byte_of<0>(m_hi));
    sub_block(5, byte_of<1>(sc_hi), byte_of<1>(m_hi));
    sub_block(6, byte_of<2>(sc_hi), byte_of<2>(m_hi));
    sub_block(7, byte_of<3>(sc_hi), byte_of<3>(m_hi));
    const __m512 d = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(rec + kQ4KDOffset)));
    const __m512 dmin = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(rec + kQ4KDminOffset)));
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) {
      const __m512 da = _mm512_set1_ps(act[t].d[b]);
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(d, da), acc[t]);
      acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum[t]), _mm512_mul_ps(dmin, da), acc[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < NT; ++t) _mm512_storeu_ps(y + t * ldy, acc[t]);
}

// The same sums for tokens laid out as matmul() lays them out (token t's record at base + t * stride:
// qs at 0, d at off_d, bsp at off_bsp; ActRow::bsp): one base pointer per part instead of three
// pointers per token (GCC spilled those at NT >= 4), and the mins term after the sub-blocks as 4
// vpdpwssd per token with the (m_j, m_j') pairs against bsp, not 8 with (m_j, m_j) against bsums.
// msum = Σ_j m_j * (bsums[2j] + bsums[2j+1]) is the same exact integer, isum the same, and the float
// steps are those of q4_K_group: the same bits (tests/verify_zp_test.cpp).
template <int NT, bool kPrefetch>
void q4_K_group_strided(const PackedMatrix& p, int64_t g, const char* base, ptrdiff_t stride, ptrdiff_t off_d,
                        ptrdiff_t off_bsp, float* y, int64_t ldy, ptrdiff_t pf) {
  const int64_t nb = p.n_blocks();
  __m512 acc[NT];
#pragma GCC unroll 8
  for (auto& v : acc) v = _mm512_setzero_ps();
  const __m512i lo4 = _mm512_set1_epi8(0x0F);
  const char* qa = base;             // token 0's quants of super-block b
  const char* da = base + off_d;     // token 0's d[b]
  const char* pa = base + off_bsp;   // token 0's bsp[b][0..3]
  for (int64_t b = 0; b < nb; ++b, qa += 256, da += 4, pa += 16) {
    const uint8_t* rec = p.qs_at(g, b);
    const __m512i s0 = _mm512_load_si512(rec + kQ4KScalesOffset);
    const __m512i s1 = _mm512_load_si512(rec + kQ4KScalesOffset + 64);
    const __m512i s2 = _mm512_load_si512(rec + kQ4KScalesOffset + 128);
    const __m512i m6 = _mm512_set1_epi8(0x3F), m30 = _mm512_set1_epi8(0x30);
    const __m512i sc_lo = _mm512_and_si512(s0, m6);
    const __m512i sc_hi = _mm512_or_si512(_mm512_and_si512(s2, lo4), _mm512_and_si512(_mm512_srli_epi32(s0, 2), m30));
    __m512i isum[NT];
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) isum[t] = _mm512_setzero_si512();
    auto sub_block = [&](int j, __m512i sc32) __attribute__((always_inline)) {
      if constexpr (kPrefetch) {  // lines 5j .. 5j + 4 of the record pf bytes ahead (packed_kernels_avx512.cpp)
        static_assert(kQ4KRecordBytes == 36 * 64, "8 sub-blocks prefetch the record's 36 lines");
#pragma GCC unroll 5
        for (int o = 5 * j; o < 5 * j + 5; ++o)
          if (o < 36) _mm_prefetch(reinterpret_cast<const char*>(rec) + pf + 64 * o, _MM_HINT_T0);
      }
      const uint8_t* qv = rec + (j / 2) * 512;
      __m512i w[8];
#pragma GCC unroll 8
      for (int c = 0; c < 8; ++c) {
        const __m512i raw = _mm512_load_si512(qv + 64 * c);
        w[c] = _mm512_and_si512(j % 2 ? _mm512_srli_epi16(raw, 4) : raw, lo4);
      }
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) {
        const char* q = qa + t * stride + 32 * j;
        __m512i s = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int c = 0; c < 8; ++c) s = _mm512_dpbusd_epi32(s, w[c], bcast_u32(q + 4 * c));
        isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(s, sc32));
      }
    };
    sub_block(0, byte_of<0>(sc_lo));
    sub_block(1, byte_of<1>(sc_lo));
    sub_block(2, byte_of<2>(sc_lo));
    sub_block(3, byte_of<3>(sc_lo));
    sub_block(4, byte_of<0>(sc_hi));
    sub_block(5, byte_of<1>(sc_hi));
    sub_block(6, byte_of<2>(sc_hi));
    sub_block(7, byte_of<3>(sc_hi));
    // Mins as int16 pairs: lane r of m_lo = bytes (m0, m1, m2, m3) of row r, of m_hi (m4 .. m7).
    const __m512i m_lo = _mm512_and_si512(s1, m6);
    const __m512i m_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(s2, 4), lo4),
                                         _mm512_and_si512(_mm512_srli_epi32(s1, 2), m30));
    const __m512i w16 = _mm512_set1_epi32(0x00FF00FF);
    const __m512i mp0 = _mm512_and_si512(m_lo, w16);                         // (m0, m2)
    const __m512i mp1 = _mm512_and_si512(_mm512_srli_epi32(m_lo, 8), w16);  // (m1, m3)
    const __m512i mp2 = _mm512_and_si512(m_hi, w16);                         // (m4, m6)
    const __m512i mp3 = _mm512_and_si512(_mm512_srli_epi32(m_hi, 8), w16);  // (m5, m7)
    const __m512 d = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(rec + kQ4KDOffset)));
    const __m512 dmin = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(rec + kQ4KDminOffset)));
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) {
      const char* bp = pa + t * stride;
      __m512i msum = _mm512_dpwssd_epi32(_mm512_setzero_si512(), mp0, bcast_u32(bp));
      msum = _mm512_dpwssd_epi32(msum, mp1, bcast_u32(bp + 4));
      msum = _mm512_dpwssd_epi32(msum, mp2, bcast_u32(bp + 8));
      msum = _mm512_dpwssd_epi32(msum, mp3, bcast_u32(bp + 12));
      float dt;
      std::memcpy(&dt, da + t * stride, 4);
      const __m512 dav = _mm512_set1_ps(dt);
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(d, dav), acc[t]);
      acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum), _mm512_mul_ps(dmin, dav), acc[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < NT; ++t) _mm512_storeu_ps(y + t * ldy, acc[t]);
}

// True if the n_tok tokens carry bsp and sit at one stride with the same offsets of d and bsp.
bool uniform_layout(const ActRow* act, int n_tok) {
  if (!act[0].bsp) return false;
  const char* b0 = reinterpret_cast<const char*>(act[0].qs);
  const ptrdiff_t stride = n_tok > 1 ? reinterpret_cast<const char*>(act[1].qs) - b0 : 0;
  for (int t = 0; t < n_tok; ++t) {
    const char* bt = reinterpret_cast<const char*>(act[t].qs);
    if (!act[t].bsp || bt != b0 + t * stride ||
        reinterpret_cast<const char*>(act[t].d) - bt != reinterpret_cast<const char*>(act[0].d) - b0 ||
        reinterpret_cast<const char*>(act[t].bsp) - bt != reinterpret_cast<const char*>(act[0].bsp) - b0)
      return false;
  }
  return true;
}

// Software prefetch distance of the records (POLYKV_PACKED_PF=<bytes>, 0: none; default 2 records,
// 4.5 KB, as q4_0's 16 blocks of 288 bytes; packed_kernels_avx512.cpp says why). The record's 36 lines
// are prefetched 5 a sub-block, as q4_0 prefetches block by block: all 36 at the record's start made a
// k = 8 step's matmuls ~15% slower (docs/VERIFY_KERNELS.md "2026-12-05e").
ptrdiff_t q4_K_prefetch_bytes() {
  static const ptrdiff_t pf = packed_prefetch_env(ptrdiff_t(2 * kQ4KRecordBytes));
  return pf;
}

template <int NT>
void strided(ptrdiff_t pf, const PackedMatrix& p, int64_t g, const char* base, ptrdiff_t stride, ptrdiff_t off_d,
             ptrdiff_t off_bsp, float* y, int64_t ldy) {
  if (pf != 0) q4_K_group_strided<NT, true>(p, g, base, stride, off_d, off_bsp, y, ldy, pf);
  else q4_K_group_strided<NT, false>(p, g, base, stride, off_d, off_bsp, y, ldy, 0);
}

void q4_K_packed(const PackedMatrix& p, int64_t g, const ActRow* act, int n_tok, float* y, int64_t ldy) {
  if (uniform_layout(act, n_tok)) {
    const ptrdiff_t pf = q4_K_prefetch_bytes();
    const char* base = reinterpret_cast<const char*>(act[0].qs);
    const ptrdiff_t stride = n_tok > 1 ? reinterpret_cast<const char*>(act[1].qs) - base : 0;
    const ptrdiff_t off_d = reinterpret_cast<const char*>(act[0].d) - base;
    const ptrdiff_t off_bsp = reinterpret_cast<const char*>(act[0].bsp) - base;
    switch (n_tok) {
      case 1: return strided<1>(pf, p, g, base, stride, off_d, off_bsp, y, ldy);
      case 2: return strided<2>(pf, p, g, base, stride, off_d, off_bsp, y, ldy);
      case 3: return strided<3>(pf, p, g, base, stride, off_d, off_bsp, y, ldy);
      case 4: return strided<4>(pf, p, g, base, stride, off_d, off_bsp, y, ldy);
      case 5: return strided<5>(pf, p, g, base, stride, off_d, off_bsp, y, ldy);
      case 6: return strided<6>(pf, p, g, base, stride, off_d, off_bsp, y, ldy);
      case 7: return strided<7>(pf, p, g, base, stride, off_d, off_bsp, y, ldy);
      default: return strided<8>(pf, p, g, base, stride, off_d, off_bsp, y, ldy);
    }
  }
  switch (n_tok) {
    case 1: q4_K_group<1>(p, g, act, y, ldy); break;
    case 2: q4_K_group<2>(p, g, act, y, ldy); break;
    case 3: q4_K_group<3>(p, g, act, y, ldy); break;
    case 4: q4_K_group<4>(p, g, act, y, ldy); break;
    case 5: q4_K_group<5>(p, g, act, y, ldy); break;
    case 6: q4_K_group<6>(p, g, act, y, ldy); break;
    case 7: q4_K_group<7>(p, g, act, y, ldy); break;
    default: q4_K_group<8>(p, g, act, y, ldy); break;
  }
}
static_assert(kMaxPackedTokens == 8, "q4_K_packed handles 1..8 tokens");

}  // namespace

PackedDotFn packed_dot_q4_K_avx512() { return q4_K_packed; }

}  // namespace polykv::cpu
