// TQ1_0 and PTQ1_0 on AVX-512 VBMI (ternary_kernels.h), on 512-bit vectors with the activations
// permuted once per matmul into the weights' *byte* order (ternary_permute_act, ActRow::tperm).
//
// A TQ1_0 block's 52 code bytes (qs[48], qh[4]) sit in one zmm x (a masked load; bytes 52..63 are 0);
// PTQ1_0 takes two blocks (26 code bytes each) per zmm, one per 256-bit half, so that one vector
// covers one Q8_K activation block (256 values) for both types. Digit n of code byte m weighs the
// activation at byte 64n + m of the permuted block (0 where no value falls), so no shuffle is needed
// on the weight side. Per block (pair): the digits of every byte by 256-entry table lookups, each two
// vpermi2b (the low 7 bits index a pair of zmm, merged on bit 7 in the mask2 form): one lookup of
// digits 0..3 packed 2 bits apiece, split by an and and three gf2p8affineqb (GFNI), and one of digit 4,
// 4 vpermi2b shared by the tokens (10 before 2026-12-04: one lookup per digit; the same codes, 1.06-1.09x
// one core from L2 at 1 token, docs/TERNARY.md); per token 5 vpdpbusd started from the block's -Σq (lane 0; PTQ1_0
// lanes 0 and 9, one per half), which gives Σ c q - Σ q = Σ t q exactly, as the other kernels.
// (The base-3 states of ternary_kernels_x86.h on these vectors, 10 byte adds and 10 vpdpbusd per token
// instead of the lookups, measured the same at 1 token and 14 % slower at 2 on this machine: not kept.)
// Then one float FMA per block (pair) and token into 16 lanes (PTQ1_0: lanes 0..7 scaled by the first
// block's d, 8..15 by the second's). Each token's chain is the same whatever NT: batch invariant.
// On the 2-core AMD EPYC (Zen 5) VM of 2026-12-02 (512-bit datapaths); on Sapphire Rapids the same
// lookups measured 0.87x of the 256-bit VNNI kernel at 1 token (docs/TERNARY.md, VBMI section).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backend/cpu/ternary_kernels.h"
#include "backend/cpu/x86_common.h"
#include "core/cpu_features.h"
#include "quant/ternary.h"

namespace polykv::cpu {
namespace {

// kDigit.t[n][b] = digit n of byte b = ((b * 3^n mod 256) * 3) >> 8 (the code 0, 1 or 2);
// kDigit.packed[b] = digits 0..3 of b in bits 2n, 2n + 1 (digit 4 has its own table, t[4]).
struct DigitTables {
  alignas(64) uint8_t t[5][256];
  alignas(64) uint8_t packed[256];
  constexpr DigitTables() : t(), packed() {
    uint32_t p = 1;
    for (int n = 0; n < 5; ++n, p *= 3)
      for (uint32_t b = 0; b < 256; ++b) t[n][b] = uint8_t((((b * p) & 255) * 3) >> 8);
    for (int b = 0; b < 256; ++b) packed[b] = uint8_t(t[0][b] | t[1][b] << 2 | t[2][b] << 4 | t[3][b] << 6);
  }
};
constexpr DigitTables kDigit{};

// gf2p8affineqb matrix that moves bits 2n and 2n + 1 of every byte to bits 0 and 1 and clears the rest
// (row i of the matrix, the byte 7 - i of the qword, selects the input bits of output bit i).
constexpr uint64_t field_matrix(int n) {
  return (uint64_t(1u << (2 * n)) << 56) | (uint64_t(1u << (2 * n + 1)) << 48);
}

// kPerm.idx[k][n][m]: the value (within the 256 of a Q8_K block) at byte m of permuted vector n, for
// k = 0 TQ1_0, 1 PTQ1_0 (ternary_permute_act), bit 7 of the index selecting values 128..255;
// kPerm.valid[k][n]: bit m set where a value falls.
struct PermTables {
  alignas(64) uint8_t idx[2][5][64];
  uint64_t valid[2][5];
  constexpr PermTables() : idx(), valid() {
    for (int k = 0; k < 2; ++k)
      for (int n = 0; n < 5; ++n)
        for (int m = 0; m < 64; ++m) {
          const int v = k == 0 ? base3_value_index(48, 4, m, n)
                               : (base3_value_index(24, 2, m % 32, n) < 0 ? -1
                                                                          : 128 * (m / 32) + base3_value_index(24, 2, m % 32, n));
          idx[k][n][m] = uint8_t(v < 0 ? 0 : v);
          if (v >= 0) valid[k][n] |= uint64_t(1) << m;
        }
  }
};
constexpr PermTables kPerm{};

// Digits of 64 code bytes with 4 byte lookups instead of 10 (vpermi2b and vpdpbusd share two pipes on
// Zen 5; gf2p8affineqb runs beside them): one 256-entry lookup (two vpermi2b, merged on bit 7) of the
// packed digits 0..3, split into four codes by an and and three gf2p8affineqb, and one of digit 4.
// The codes are the same bytes as five lookups of kDigit.t (the same products, the same bits).
struct Tables {
  __m512i p0, p1, p2, p3;  // kDigit.packed, entries 0..63, 64..127, 128..191, 192..255
  __m512i d0, d1, d2, d3;  // kDigit.t[4], the same quarters
  Tables() {
    p0 = _mm512_load_si512(kDigit.packed), p1 = _mm512_load_si512(kDigit.packed + 64);
    p2 = _mm512_load_si512(kDigit.packed + 128), p3 = _mm512_load_si512(kDigit.packed + 192);
    d0 = _mm512_load_si512(kDigit.t[4]), d1 = _mm512_load_si512(kDigit.t[4] + 64);
    d2 = _mm512_load_si512(kDigit.t[4] + 128), d3 = _mm512_load_si512(kDigit.t[4] + 192);
  }
  void codes(__m512i x, __m512i c[5]) const {
    const __mmask64 khi = _mm512_movepi8_mask(x), klo = _knot_mask64(khi);
    const __m512i packed = _mm512_mask2_permutex2var_epi8(p2, _mm512_mask2_permutex2var_epi8(p0, x, klo, p1), khi, p3);
    c[0] = _mm512_and_si512(packed, _mm512_set1_epi8(3));
    c[1] = _mm512_gf2p8affine_epi64_epi8(packed, _mm512_set1_epi64(int64_t(field_matrix(1))), 0);
    c[2] = _mm512_gf2p8affine_epi64_epi8(packed, _mm512_set1_epi64(int64_t(field_matrix(2))), 0);
    c[3] = _mm512_gf2p8affine_epi64_epi8(packed, _mm512_set1_epi64(int64_t(field_matrix(3))), 0);
    c[4] = _mm512_mask2_permutex2var_epi8(d2, _mm512_mask2_permutex2var_epi8(d0, x, klo, d1), khi, d3);
  }
};

template <bool kPtq>
struct VbmiKernel {
  template <int NT>
  static void run(const void* w_row, const ActRow* a, int64_t n, float* out) {
    // One pass for every NT (5..8 tokens spill some of the 20 table registers; two passes of <= 4 tokens
    // were 13..22 % slower at 5..8 tokens on one core once the permuted activations took 320 B per 256).
    const Tables tab;
    __m512 acc[NT];
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
    const uint8_t* w = static_cast<const uint8_t*>(w_row);
    const int64_t nb = n / 256;
    constexpr int kStep = kPtq ? 2 * int(sizeof(BlockPTQ1_0)) : int(sizeof(BlockTQ1_0));  // bytes per 256 values
    constexpr __mmask16 kStart = kPtq ? 0x0201 : 0x0001;  // lanes of the -Σq pair (any lane of each half)
    for (int64_t b = 0; b < nb; ++b, w += kStep) {
      _mm_prefetch(reinterpret_cast<const char*>(w) + kTernaryPrefetchBytes, _MM_HINT_T0);
      __m512i x;
      __m512 dv;
      if constexpr (kPtq) {
        const __mmask32 k26 = (1u << 26) - 1;
        x = _mm512_inserti64x4(_mm512_zextsi256_si512(_mm256_maskz_loadu_epi8(k26, w)),
                               _mm256_maskz_loadu_epi8(k26, w + sizeof(BlockPTQ1_0)), 1);
        const auto* blk = reinterpret_cast<const BlockPTQ1_0*>(w);
        uint16_t h0, h1;
        std::memcpy(&h0, &blk[0].d, 2), std::memcpy(&h1, &blk[1].d, 2);
        dv = _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16(int16_t(h0))), _mm_set1_epi16(int16_t(h1)), 1));
      } else {
        x = _mm512_maskz_loadu_epi8((__mmask64(1) << 52) - 1, w);
        uint16_t h;
        std::memcpy(&h, &reinterpret_cast<const BlockTQ1_0*>(w)->d, 2);
        dv = _mm512_cvtph_ps(_mm256_set1_epi16(int16_t(h)));
      }
      __m512i c[5];
      tab.codes(x, c);
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) {
        const int8_t* p = a[t].tperm + 320 * b;
        __m512i s = _mm512_maskz_broadcast_i32x2(kStart, _mm_loadl_epi64(
                                                             reinterpret_cast<const __m128i*>(a[t].tperm + 320 * nb + 8 * b)));
#pragma GCC unroll 5
        for (int d = 0; d < 5; ++d) s = _mm512_dpbusd_epi32(s, c[d], _mm512_loadu_si512(p + 64 * d));
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dv, _mm512_set1_ps(a[t].d[b])), acc[t]);
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) out[t] = _mm512_reduce_add_ps(acc[t]);
  }
};

// The VBMI kernel where the activations were permuted (matmul does it when ternary_wants_perm), else
// the AVX-512 one (PTQ1_0 rows not of whole 256s; callers that build ActRows themselves).
template <DType kType>
void vbmi_dot(const void* w_row, const ActRow* act, int n_tok, int64_t n_in, float* out) {
  if (act[0].tperm == nullptr) return ternary_row_dot_avx512(kType)(w_row, act, n_tok, n_in, out);
  by_tokens<VbmiKernel<kType == DType::PTQ1_0>>(w_row, act, n_tok, n_in, out);
}

}  // namespace

void ternary_permute_act_vbmi(DType type, const int8_t* qs, const int16_t* bsums, int64_t n_in, int8_t* out) {
  const int k = type == DType::PTQ1_0 ? 1 : 0;
  const int64_t nb = n_in / 256;
  int8_t* sums = out + 320 * nb;
  for (int64_t b = 0; b < nb; ++b, out += 320, qs += 256, bsums += 16) {
    const __m512i q0 = _mm512_loadu_si512(qs), q1 = _mm512_loadu_si512(qs + 64);
    const __m512i q2 = _mm512_loadu_si512(qs + 128), q3 = _mm512_loadu_si512(qs + 192);
#pragma GCC unroll 5
    for (int n = 0; n < 5; ++n) {
      const __m512i idx = _mm512_load_si512(kPerm.idx[k][n]);
      const __m512i lo = _mm512_permutex2var_epi8(q0, idx, q1), hi = _mm512_permutex2var_epi8(q2, idx, q3);
      const __m512i v = _mm512_mask_blend_epi8(_mm512_movepi8_mask(idx), lo, hi);
      _mm512_storeu_si512(out + 64 * n, _mm512_maskz_mov_epi8(kPerm.valid[k][n], v));
    }
    int32_t s[2] = {0, 0};  // Σq per 256 (TQ1_0) or per 128 (PTQ1_0)
    for (int j = 0; j < 16; ++j) s[k * (j / 8)] += bsums[j];
    s[0] = -s[0], s[1] = -s[1];
    std::memcpy(sums + 8 * b, s, 8);
  }
}

RowDotFn ternary_row_dot_avx512vbmi(DType type) {
  static const bool cpu_ok = cpu_features().has_avx512_set() && cpu_features().avx512vbmi && cpu_features().gfni;
  const int mode = ternary_vbmi_kernels();
  if (!cpu_ok || mode == 0) return nullptr;
  switch (type) {
    case DType::TQ1_0: return mode == 1 || cpu_features().amd_zen5_or_later ? vbmi_dot<DType::TQ1_0> : nullptr;
    case DType::PTQ1_0: return vbmi_dot<DType::PTQ1_0>;
    default: return nullptr;
  }
}

}  // namespace polykv::cpu
