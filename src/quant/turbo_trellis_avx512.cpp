// AVX-512 decoder of trellis-coded turbo rows into the rotated basis: the windows, subsets and indices
// of 32 coordinates at a time in 16-bit lanes (byte shuffles and variable word shifts), the levels looked
// up by one vpermps (8 or 16 levels) or one vpermt2ps (32 levels) per 16.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstring>

#include "core/cpu_features.h"
#include "quant/turbo.h"
#include "quant/turbo_trellis.h"
#include "quant/turbo_trellis_internal.h"

namespace polykv::turbo::trellis {
namespace {

// 32 coordinates per step in 16-bit lanes (AVX-512BW): lane l of a chunk of 32 (coordinate i = 32c + l)
// gets its 4-bit window of t bits (t_{i-3} .. t_i) and its (bits-1)-bit index by one byte shuffle of the
// chunk's bytes, a variable word shift and a mask; the subset of the window by a 16-entry byte shuffle;
// then k = subset + 4 * index goes to 32-bit lanes for the level lookup (vpermps / vpermt2ps) and the
// norm's multiply, the reference's one float operation. The bytes a chunk reads come in by masked loads,
// so nothing past the group (or before its t bits) is ever read or counted.
struct ChunkConsts {
  __m512i t_idx, t_shift;  // window of lane l: bits l+5 .. l+8 of t bytes 4c-1 .. 4c+4 (byte 4c-1 = t_{32c-8..})
  __m512i j_idx, j_shift;  // index of lane l: bits w*l .. w*l+w-1 of the chunk's 4w index bytes
  __m512i subset_table;    // byte w: subset of window w (kSubsetWord), in every 128-bit lane
};

template <int kBits>
ChunkConsts chunk_consts() {
  constexpr int w = kBits - 1;
  alignas(64) uint8_t ti[64], ji[64], st[64];
  alignas(64) uint16_t ts[32], js[32];
  for (int l = 0; l < 32; ++l) {
    ti[2 * l] = uint8_t((l + 5) / 8);
    ti[2 * l + 1] = uint8_t((l + 5) / 8 + 1);
    ts[l] = uint16_t((l + 5) % 8);
    ji[2 * l] = uint8_t(w * l / 8);
    ji[2 * l + 1] = uint8_t(w * l / 8 + 1);
    js[l] = uint16_t(w * l % 8);
  }
  for (int b = 0; b < 64; ++b) st[b] = uint8_t((kSubsetWord >> (2 * (b % 16))) & 3);
  return ChunkConsts{_mm512_load_si512(ti), _mm512_load_si512(ts), _mm512_load_si512(ji), _mm512_load_si512(js),
                     _mm512_load_si512(st)};
}

template <int kBits>
void decode_groups(const uint8_t* src, float* y, int head_dim) {
  constexpr int w = kBits - 1;
  static const ChunkConsts K = chunk_consts<kBits>();
  const detail::Shape s = detail::shape(kBits, head_dim);  // head_dim was validated when the row was made
  const float* lv = detail::level_table(kBits, s.group);
  // 8 levels fill lanes 0..7 (indices < 8 never read the rest); 32 levels span two registers.
  const __m512 table_lo = kBits == 2 ? _mm512_castps256_ps512(_mm256_loadu_ps(lv)) : _mm512_loadu_ps(lv);
  const __m512 table_hi = kBits == 4 ? _mm512_loadu_ps(lv + 16) : table_lo;
  const __m512i fifteen = _mm512_set1_epi16(15), index_mask = _mm512_set1_epi16((1 << w) - 1);
  const __m512i zero_high = _mm512_set1_epi16(short(0x8000));  // a shuffle index byte of 0x80 gives 0
  const int t_size = s.group / 8, j_size = s.group * w / 8;
  for (int g = 0; g < s.n_groups; ++g) {
    const detail::Record r = detail::record(src, s, g);
    const __m512 norm = _mm512_set1_ps(r.norm);
    float* out = y + g * s.group;
    for (int c = 0; c < s.group / 32; ++c) {
      // t bytes 4c-1 .. 4c+4 that lie in t (the record's byte before t_0 is the norm's: masked off, it
      // counts as 0; the last chunk has no byte 4c+4); index bytes 4wc .. that lie in the index field.
      const __mmask16 tmask = __mmask16((c == 0 ? 0x3E : 0x3F) & (4 * c + 4 == t_size ? 0x1F : 0x3F));
      const int j_left = j_size - 4 * w * c;
      const __mmask16 jmask = j_left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << j_left) - 1);
      const __m128i tb = _mm_maskz_loadu_epi8(tmask, r.tbits + 4 * c - 1);
      const __m512i tq = _mm512_broadcastq_epi64(tb);
      const __m512i win = _mm512_and_si512(_mm512_srlv_epi16(_mm512_shuffle_epi8(tq, K.t_idx), K.t_shift), fifteen);
      const __m512i subset = _mm512_shuffle_epi8(K.subset_table, _mm512_or_si512(win, zero_high));
      const __m128i jb = _mm_maskz_loadu_epi8(jmask, r.jbits + 4 * w * c);
      const __m512i jq = _mm512_broadcast_i32x4(jb);
      const __m512i index =
          _mm512_and_si512(_mm512_srlv_epi16(_mm512_shuffle_epi8(jq, K.j_idx), K.j_shift), index_mask);
      const __m512i k16 = _mm512_add_epi16(subset, _mm512_slli_epi16(index, 2));
      const __m512i k0 = _mm512_cvtepu16_epi32(_mm512_castsi512_si256(k16));
      const __m512i k1 = _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(k16, 1));
      const __m512 v0 = kBits == 4 ? _mm512_permutex2var_ps(table_lo, k0, table_hi) : _mm512_permutexvar_ps(k0, table_lo);
      const __m512 v1 = kBits == 4 ? _mm512_permutex2var_ps(table_lo, k1, table_hi) : _mm512_permutexvar_ps(k1, table_lo);
      _mm512_storeu_ps(out + 32 * c, _mm512_mul_ps(norm, v0));
      _mm512_storeu_ps(out + 32 * c + 16, _mm512_mul_ps(norm, v1));
    }
  }
}

void decode_rotated_avx512(int bits, const uint8_t* src, float* y, int head_dim) {
  if (bits == 2) return decode_groups<2>(src, y, head_dim);
  if (bits == 3) return decode_groups<3>(src, y, head_dim);
  return decode_groups<4>(src, y, head_dim);
}

}  // namespace

DecodeFn decode_rotated_avx512_kernel() { return cpu_features().has_avx512_set() ? decode_rotated_avx512 : nullptr; }

}  // namespace polykv::turbo::trellis
