// TQ1_0 on AVX-512 VBMI (ternary_kernels.h): base-3 digits by byte lookup instead of arithmetic.
//
// A whole block's 52 code bytes (qs[48], qh[4]) sit in one zmm x (a masked load; bytes 52..63 are 0).
// Digit n of every byte is one 256-entry table lookup: two vpermi2b over 128-entry halves of the table
// (the low 7 bits index a pair of zmm), merged on bit 7 of x (mask2 form: the first lookup writes the
// bytes < 128 and leaves the others as x, the second maps those). Five digits: 10 vpermi2b per block,
// against ~30 adds / joins / blends to build the states in ternary_kernels_x86.h.
// The codes then come out in byte order, not value order: code vector n, byte m holds the value
//   m < 32: 32n + m        32 <= m < 48: 160 + 16n + (m - 32)        48 <= m < 52, n < 4: 240 + 4n + (m - 48)
// so the activations are permuted into that order once per matmul (tq1_0_vbmi_act, ternary_kernels.h:
// 384 bytes per 256 values: five 64-byte vectors, 0 where no value falls, then the int32 -Σq of the
// block in lane 0 of a sixth). Per block and token: five vpdpbusd started from that sixth vector give
// Σ c q - Σ q = Σ t q exactly, as the other kernels; then one float FMA (16 lanes).
// Batch invariance: each token's chain is the same whatever NT.
#include <immintrin.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "backend/cpu/ternary_kernels.h"
#include "backend/cpu/x86_common.h"
#include "core/cpu_features.h"
#include "quant/ternary.h"

namespace polykv::cpu {
namespace {

// kDigit.t[n][b] = digit n of byte b = ((b * 3^n mod 256) * 3) >> 8 (0, 1 or 2: the code).
struct DigitTables {
  alignas(64) uint8_t t[5][256];
  constexpr DigitTables() : t() {
    uint32_t p = 1;
    for (int n = 0; n < 5; ++n, p *= 3)
      for (uint32_t b = 0; b < 256; ++b) t[n][b] = uint8_t((((b * p) & 255) * 3) >> 8);
  }
};
constexpr DigitTables kDigit{};

struct Tq1Vbmi {
  template <int NT>
  static void run(const void* w_row, const ActRow* a, int64_t n, float* out) {
    const BlockTQ1_0* w = static_cast<const BlockTQ1_0*>(w_row);
    __m512i lo0[5], lo1[5], hi0[5], hi1[5];  // table n, entries 0..63, 64..127, 128..191, 192..255
#pragma GCC unroll 5
    for (int d = 0; d < 5; ++d) {
      lo0[d] = _mm512_load_si512(kDigit.t[d]);
      lo1[d] = _mm512_load_si512(kDigit.t[d] + 64);
      hi0[d] = _mm512_load_si512(kDigit.t[d] + 128);
      hi1[d] = _mm512_load_si512(kDigit.t[d] + 192);
    }
    __m512 acc[NT];
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
    constexpr __mmask64 kBytes = (__mmask64(1) << 52) - 1;  // qs[48], qh[4]
    for (int64_t b = 0; b < n / 256; ++b) {
      const __m512i x = _mm512_maskz_loadu_epi8(kBytes, &w[b]);
      const __mmask64 khi = _mm512_movepi8_mask(x), klo = _knot_mask64(khi);
      __m512i c[5];
#pragma GCC unroll 5
      for (int d = 0; d < 5; ++d) {
        const __m512i l = _mm512_mask2_permutex2var_epi8(lo0[d], x, klo, lo1[d]);
        c[d] = _mm512_mask2_permutex2var_epi8(hi0[d], l, khi, hi1[d]);
      }
      const float dw = half_to_f32(w[b].d);
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) {
        const int8_t* p = a[t].tq1p + 384 * b;
        __m512i s = _mm512_load_si512(p + 320);  // -Σ q in lane 0
#pragma GCC unroll 5
        for (int d = 0; d < 5; ++d) s = _mm512_dpbusd_epi32(s, c[d], _mm512_load_si512(p + 64 * d));
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(dw * a[t].d[b]), acc[t]);
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) out[t] = _mm512_reduce_add_ps(acc[t]);
  }
};

bool vbmi_enabled() {
  const CpuFeatures& f = cpu_features();
  const char* env = std::getenv("POLYKV_TERNARY_VBMI");  // "0": the VNNI kernel instead (A/B runs)
  return f.has_avx512_set() && f.avx512vbmi && !(env && std::strcmp(env, "0") == 0);
}

}  // namespace

RowDotFn ternary_row_dot_avx512vbmi(DType type) {
  static const bool on = vbmi_enabled();
  return on && type == DType::TQ1_0 ? by_tokens<Tq1Vbmi> : nullptr;
}

}  // namespace polykv::cpu
