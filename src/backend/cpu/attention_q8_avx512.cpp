// AVX-512 VNNI form of attention_q8.h's integer scores: the tile's 32 K rows are repacked once,
// keys in the lanes, and every query row then costs hd / 4 vpdpbusd per 16 keys and a multiply-add
// per block, with no horizontal reduction.
//
// Repack (shared by all rows of the call): kt[d][j] = the 4 bytes 4d .. 4d+3 of key j's values, each
// XOR 0x80 (k + 128, unsigned), [hd / 4][32] dwords; dk[b][j] = key j's block-b scale, [nb][32].
// Per row, block b and 16 keys: acc = sum over the block's 8 dwords of vpdpbusd(kt, broadcast q dword)
//   = sum_i (k_i + 128) q_i = isum_b + 128 * sum_i q_i,
// so isum_b = acc - q128[b], exact; then s = fma(float(isum_b), dk[b] * dq[b], s): the reference's
// arithmetic in the reference's order (attention_q8.cpp), lane by lane.
#include "core/fp_contract_off.h"  // first: the multiply and the fma stay as written
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backend/cpu/attention_q8.h"
#include "backend/cpu/transpose16_avx512.h"
#include "core/cpu_features.h"

namespace polykv {
namespace {

constexpr int kKeys = 32;
constexpr int kBlockBytes = 34;  // q8_0: fp16 d, 32 int8

struct Packed {
  alignas(64) uint32_t kt[kQ8ScoreMaxHd / 4][kKeys];
  alignas(64) float dk[kQ8ScoreMaxHd / 32][kKeys];
};

// Row j of the tile: rows[j], or base + j * stride when the 32 rows are evenly spaced (the usual
// case: a tile inside one KV block), which spares the kernel 16 live pointers.
struct RowList {
  const uint8_t* const* rows;
  const uint8_t* row(int j) const { return rows[j]; }
};
struct RowStride {
  const uint8_t* base;
  ptrdiff_t stride;
  const uint8_t* row(int j) const { return base + ptrdiff_t(j) * stride; }
};

template <class Rows>
void pack_tile(const Rows& rows, int hd, Packed& t) {
  const int nb = hd / 32;
  const __m512i flip = _mm512_set1_epi8(char(0x80));
  for (int h = 0; h < kKeys; h += 16)
    for (int b = 0; b < nb; b += 2) {  // two blocks = 16 dwords per key
      const bool pair = b + 1 < nb;
      __m512i r[16];
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) {
        const uint8_t* p = rows.row(h + j) + size_t(b) * kBlockBytes + 2;
        const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
        const __m256i hi = pair ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + kBlockBytes))
                                : _mm256_setzero_si256();
        r[j] = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1), flip);
      }
      transpose16(r);
      const int n_out = pair ? 16 : 8;
      for (int e = 0; e < n_out; ++e) _mm512_store_si512(&t.kt[8 * b + e][h], r[e]);
    }
  alignas(64) uint16_t dh[kQ8ScoreMaxHd / 32][kKeys];  // the scales as stored, then 16 at a time to f32
  for (int j = 0; j < kKeys; ++j)
    for (int b = 0; b < nb; ++b) std::memcpy(&dh[b][j], rows.row(j) + size_t(b) * kBlockBytes, 2);
  for (int b = 0; b < nb; ++b)
    for (int h = 0; h < kKeys; h += 16)
      _mm512_store_ps(&t.dk[b][h], _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(&dh[b][h]))));
}

template <int NR>
void score_rows(const Packed& t, int nb, const uint8_t* const* q, float* S, size_t s_stride) {
  __m512 s[NR][2];
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r) s[r][0] = s[r][1] = _mm512_setzero_ps();
  for (int b = 0; b < nb; ++b) {
    __m512i a[NR][2];
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) a[r][0] = a[r][1] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      const int d = 8 * b + i;
      const __m512i k0 = _mm512_load_si512(&t.kt[d][0]), k1 = _mm512_load_si512(&t.kt[d][16]);
#pragma GCC unroll 4
      for (int r = 0; r < NR; ++r) {
        int32_t qd;
        std::memcpy(&qd, q[r] + 8 * size_t(nb) + 4 * size_t(d), 4);
        const __m512i qv = _mm512_set1_epi32(qd);
        a[r][0] = _mm512_dpbusd_epi32(a[r][0], k0, qv);
        a[r][1] = _mm512_dpbusd_epi32(a[r][1], k1, qv);
      }
    }
    const __m512 dk0 = _mm512_load_ps(&t.dk[b][0]), dk1 = _mm512_load_ps(&t.dk[b][16]);
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) {
      float dq;
      int32_t q128;
      std::memcpy(&dq, q[r] + 4 * size_t(b), 4);
      std::memcpy(&q128, q[r] + 4 * size_t(nb + b), 4);
      const __m512i off = _mm512_set1_epi32(q128);
      const __m512 dqv = _mm512_set1_ps(dq);
      s[r][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(a[r][0], off)), _mm512_mul_ps(dk0, dqv), s[r][0]);
      s[r][1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(a[r][1], off)), _mm512_mul_ps(dk1, dqv), s[r][1]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r) {
    _mm512_storeu_ps(S + size_t(r) * s_stride, s[r][0]);
    _mm512_storeu_ps(S + size_t(r) * s_stride + 16, s[r][1]);
  }
}

void score_tile_q8(const uint8_t* const* k_rows, int hd, const uint8_t* const* q_rows, int n_rows, float* S,
                   size_t s_stride) {
  Packed t;
  const ptrdiff_t stride = k_rows[1] - k_rows[0];
  bool even = true;
  for (int j = 2; j < kKeys; ++j) even = even && k_rows[j] == k_rows[0] + ptrdiff_t(j) * stride;
  if (even) {
    pack_tile(RowStride{k_rows[0], stride}, hd, t);
  } else {
    pack_tile(RowList{k_rows}, hd, t);
  }
  const int nb = hd / 32;
  int r0 = 0;
  for (; r0 + 4 <= n_rows; r0 += 4) score_rows<4>(t, nb, q_rows + r0, S + size_t(r0) * s_stride, s_stride);
  switch (n_rows - r0) {
    case 1: score_rows<1>(t, nb, q_rows + r0, S + size_t(r0) * s_stride, s_stride); break;
    case 2: score_rows<2>(t, nb, q_rows + r0, S + size_t(r0) * s_stride, s_stride); break;
    case 3: score_rows<3>(t, nb, q_rows + r0, S + size_t(r0) * s_stride, s_stride); break;
    default: break;
  }
}

}  // namespace

Q8ScoreTileFn score_tile_q8_avx512() { return cpu_features().has_avx512_set() ? score_tile_q8 : nullptr; }

}  // namespace polykv
