// The ternary LUT matmul (ternary_lut.h) on AVX-512 VBMI.
//
// Per thread (chunks [c0, c1)), per tile of up to 8 tokens, per 256-value block b:
//  1. tables: per token and code byte position m, T_m[q] for all 256 codes q, as 16-bit integers split into
//     a low-byte plane and a high-byte plane of 256 bytes each (512 B per m: 26 KB per token for TQ1_0, in
//     L1 at one token). The activations digit n of position m weighs are gathered by vpermi2b into vectors
//     X_n (lane m); T_m[q] = Σ_n c_n(q) x_n - Σ_n x_n with codes c = t + 1 (0..3): three vpmaddubsw of
//     constant code pairs (c_0, c_1), (c_2, c_3), (c_4, 0) per 32 entries with the broadcast pairs
//     (x_0, x_1), (x_2, x_3), (x_4, 0), then one byte permute per plane and 64 entries.
//  2. per tile of 8 chunks of 64 rows and per m: the position's table loaded once (8 vectors), then for each
//     chunk the 64 code bytes index both planes (two vpermi2b each: entries 0..127, then 128..255 where bit 7
//     is set, the mask2 form merging the two), vpunpck{l,h}bw rebuild the 16-bit entries of rows 0..31 /
//     32..63 (lut_row_of_lane) and vpaddw sums them; at the end of a segment the sums are widened to int32;
//     per block one FMA per 16 rows and token into accumulators kept per chunk.
// One core from L2 at one token: ~60 ns per chunk and block (3456 B of TQ1_0: ~57 GB/s), against ~160 for the
// row kernel; from DRAM with 2 threads the stream, not this arithmetic, sets the pace (docs/TERNARY.md 2026-12-05).
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12 on the 256-bit extracts / widenings of avx512fintrin.h
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/ternary_kernels.h"
#include "backend/cpu/ternary_lut.h"
#include "quant/ternary.h"

namespace polykv::cpu {
namespace {

// Per type: the code pairs for vpmaddubsw (pair k of entry q: codes of digits 2k, 2k + 1; pair 2: digit 4
// and 0) and the gather of the activations (byte of the 256-value block for digit n of position m).
struct LutConsts {
  alignas(64) uint8_t pairs[3][256][2];
  alignas(64) uint8_t gidx[5][64];
  uint64_t gvalid[5] = {};
  explicit LutConsts(DType type) {
    for (int q = 0; q < 256; ++q)
      for (int k = 0; k < 3; ++k)
        for (int i = 0; i < 2; ++i) {
          const int n = 2 * k + i;
          pairs[k][q][i] = n < 5 ? uint8_t(lut_digit_value(type, uint8_t(q), n) + 1) : 0;
        }
    for (int n = 0; n < 5; ++n)
      for (int m = 0; m < 64; ++m) {
        const int v = lut_value_index(type, m, n);
        gidx[n][m] = uint8_t(v < 0 ? 0 : v);
        if (v >= 0) gvalid[n] |= uint64_t(1) << m;
      }
  }
};

const LutConsts& consts(DType type) {
  static const LutConsts tq1(DType::TQ1_0), tq2(DType::TQ2_0), ptq1(DType::PTQ1_0);
  return type == DType::TQ1_0 ? tq1 : type == DType::TQ2_0 ? tq2 : ptq1;
}

// Byte indices: the low (even) and high (odd) bytes of the 64 words of two vectors; the interleave of the
// first / last 32 bytes of two vectors into words (byte of the first vector low).
struct Perms {
  alignas(64) uint8_t even[64], odd[64], il_lo[64], il_hi[64];
  constexpr Perms() : even(), odd(), il_lo(), il_hi() {
    for (int i = 0; i < 64; ++i) {
      even[i] = uint8_t(2 * i), odd[i] = uint8_t(2 * i + 1);
      il_lo[i] = uint8_t(i % 2 == 0 ? i / 2 : 64 + i / 2);
      il_hi[i] = uint8_t(i % 2 == 0 ? 32 + i / 2 : 96 + i / 2);
    }
  }
};
constexpr Perms kPerms{};

// Tables of one token and block: tab + 512 m = low plane (256 B) then high plane of position m. per_table(m) is
// called before each table (the caller's prefetches).
template <typename PerTable>
void build_tables(const LutConsts& k, int n_code, const int8_t* x, uint8_t* tab, PerTable&& per_table) {
  const __m512i q0 = _mm512_loadu_si512(x), q1 = _mm512_loadu_si512(x + 64);
  const __m512i q2 = _mm512_loadu_si512(x + 128), q3 = _mm512_loadu_si512(x + 192);
  __m512i X[5];
  for (int n = 0; n < 5; ++n) {
    const __m512i idx = _mm512_load_si512(k.gidx[n]);
    const __m512i lo = _mm512_permutex2var_epi8(q0, idx, q1), hi = _mm512_permutex2var_epi8(q2, idx, q3);
    X[n] = _mm512_maskz_mov_epi8(k.gvalid[n], _mm512_mask_blend_epi8(_mm512_movepi8_mask(idx), lo, hi));
  }
  // Per position m: the broadcast word pairs and -Σ x_n, as 16-bit words (lanes m).
  alignas(64) uint16_t w[3][64];
  alignas(64) int16_t negsum[64];
  const __m512i zero = _mm512_setzero_si512();
  const __m512i il_lo = _mm512_load_si512(kPerms.il_lo), il_hi = _mm512_load_si512(kPerms.il_hi);
  for (int p = 0; p < 3; ++p) {
    const __m512i a = X[2 * p], b = p < 2 ? X[2 * p + 1] : zero;
    _mm512_store_si512(w[p], _mm512_permutex2var_epi8(a, il_lo, b));
    _mm512_store_si512(w[p] + 32, _mm512_permutex2var_epi8(a, il_hi, b));
  }
  __m512i s_lo = zero, s_hi = zero;
  for (int n = 0; n < 5; ++n) {
    s_lo = _mm512_sub_epi16(s_lo, _mm512_cvtepi8_epi16(_mm512_castsi512_si256(X[n])));
    s_hi = _mm512_sub_epi16(s_hi, _mm512_cvtepi8_epi16(_mm512_extracti64x4_epi64(X[n], 1)));
  }
  _mm512_store_si512(negsum, s_lo);
  _mm512_store_si512(negsum + 32, s_hi);

  const __m512i even = _mm512_load_si512(kPerms.even), odd = _mm512_load_si512(kPerms.odd);
  const auto* pairs = reinterpret_cast<const __m512i*>(k.pairs);  // [3][8] vectors of 32 code pairs
  for (int m = 0; m < n_code; ++m, tab += 512) {
    per_table(m);
    const __m512i w01 = _mm512_set1_epi16(int16_t(w[0][m])), w23 = _mm512_set1_epi16(int16_t(w[1][m]));
    const __m512i w4 = _mm512_set1_epi16(int16_t(w[2][m])), ns = _mm512_set1_epi16(negsum[m]);
#pragma GCC unroll 4
    for (int j = 0; j < 8; j += 2) {
      __m512i v[2];
      for (int h = 0; h < 2; ++h) {
        const __m512i a = _mm512_maddubs_epi16(_mm512_load_si512(pairs + j + h), w01);
        const __m512i b = _mm512_maddubs_epi16(_mm512_load_si512(pairs + 8 + j + h), w23);
        const __m512i c = _mm512_maddubs_epi16(_mm512_load_si512(pairs + 16 + j + h), w4);
        v[h] = _mm512_add_epi16(_mm512_add_epi16(a, b), _mm512_add_epi16(c, ns));
      }
      _mm512_store_si512(tab + 32 * j, _mm512_permutex2var_epi8(v[0], even, v[1]));
      _mm512_store_si512(tab + 256 + 32 * j, _mm512_permutex2var_epi8(v[0], odd, v[1]));
    }
  }
}

// Lookup of 64 codes in a 256-entry byte plane (4 vectors at t): bit 7 picks the pair of vectors.
inline __m512i lookup(const uint8_t* t, __m512i x, __mmask64 klo, __mmask64 khi) {
  const __m512i first = _mm512_mask2_permutex2var_epi8(_mm512_load_si512(t), x, klo, _mm512_load_si512(t + 64));
  return _mm512_mask2_permutex2var_epi8(_mm512_load_si512(t + 128), first, khi, _mm512_load_si512(t + 192));
}

// Widened partial sums of rows 16j .. 16j + 15 (j = 0..3) from the two 16-bit vectors.
inline void widen(__m512i a0, __m512i a1, __m512i s[4]) {
  s[0] = _mm512_cvtepi16_epi32(_mm512_castsi512_si256(a0));
  s[1] = _mm512_cvtepi16_epi32(_mm512_extracti64x4_epi64(a0, 1));
  s[2] = _mm512_cvtepi16_epi32(_mm512_castsi512_si256(a1));
  s[3] = _mm512_cvtepi16_epi32(_mm512_extracti64x4_epi64(a1, 1));
}

// acc[j] = fma(float(s[j]), d * dx, acc[j]) for the 64 rows (d: 64 fp16 in row order).
inline void scale_into(const __m512i s[4], const uint8_t* d, float dx, float* acc) {
  const __m512 vdx = _mm512_set1_ps(dx);
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    const __m512 dj = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(d + 32 * j)));
    _mm512_store_ps(acc + 16 * j,
                    _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[j]), _mm512_mul_ps(dj, vdx), _mm512_load_ps(acc + 16 * j)));
  }
}

// The second prefetch: with only the L1 one (4 KB ahead) this kernel streamed tq1_0 at ~51-54 GB/s with 2 threads
// on the Zen 5 VM, ~55 with no arithmetic at all, against ~75 for the q8_0 packed kernel; a T1 prefetch 12 KB
// ahead gave 57-64 (bench/ternary_bench.cpp --paired, 2026-12-05; 8 and 16 KB within the host's noise of it).
constexpr int64_t kLutL2PrefetchBytes = 12288;
constexpr int64_t kLutBuildPrefetchBytes = 16384;

template <DType kType, int NT>
void run_tile(const PackedMatrix& p, int64_t c0, int64_t c1, const ActRow* act, float* y, int64_t ldy,
              uint8_t* tabs, float* accf) {
  constexpr int kCode = kType == DType::TQ2_0 ? 64 : 52;
  constexpr int kSeg = kType == DType::TQ1_0 ? 52 : kType == DType::TQ2_0 ? 32 : 26;
  constexpr int kRec = kLutRows * (kCode + (kType == DType::PTQ1_0 ? 4 : 2));  // bytes per chunk and block
  constexpr size_t kTab = size_t(kCode) * 512;
  const LutConsts& k = consts(kType);
  const int64_t nb = p.n_in / 256, nch = c1 - c0, G = p.n_groups;
  std::fill(accf, accf + size_t(NT * nch * kLutRows), 0.0f);
  alignas(64) __m512i acc16[NT][kLutTile][2];  // 16-bit partial sums of (token, chunk of the tile)
  alignas(64) __m512i first[NT][kLutTile][4];  // TQ2_0: the first half's widened sums
  for (int64_t b = 0; b < nb; ++b) {
    // This thread's bytes of block b: [base_b, base_b + span); block b + 1's are block_stride further.
    const int64_t jb = c0 / kLutTile * kLutTile, je = std::min<int64_t>(G, (c1 + kLutTile - 1) / kLutTile * kLutTile);
    const uint8_t* base_b = p.qs.get() + size_t(b * G + jb) * kRec;
    const int64_t span = (je - jb) * kRec, block_stride = G * kRec;
    // While the tables are built (no weight is read), keep the stream going: kLutBuildPrefetchBytes past the L2
    // prefetch's frontier, spread over the first token's tables (the cursor below repeats some: harmless).
    for (int t = 0; t < NT; ++t)
      build_tables(k, kCode, act[t].qs + 256 * b, tabs + t * kTab, [&](int m) {
        if (t != 0) return;
        constexpr int64_t kLines = kLutBuildPrefetchBytes / 64, kPer = (kLines + kCode - 1) / kCode;
        for (int64_t l = kPer * m; l < std::min<int64_t>(kLines, kPer * (m + 1)); ++l) {
          const int64_t v = kLutL2PrefetchBytes + 64 * l;
          _mm_prefetch(reinterpret_cast<const char*>(v < span ? base_b + v : base_b + block_stride + (v - span)),
                       _MM_HINT_T1);
        }
      });
    float dx[NT];
    for (int t = 0; t < NT; ++t) dx[t] = act[t].d[b];
    int64_t pf_v = kTernaryPrefetchBytes;  // prefetch cursor, an offset in that stream
    for (int64_t j0 = jb; j0 < c1; j0 += kLutTile) {
      const int64_t tc = std::min<int64_t>(kLutTile, G - j0), cs = std::max(c0, j0), ce = std::min(c1, j0 + tc);
      const int64_t tile_lines = tc * kRec / 64, pf_per_m = (tile_lines + kCode - 1) / kCode;
      int64_t pf_done = 0;
      const int n = int(ce - cs);
      const uint8_t* rec = p.qs.get() + size_t(b * G + j0) * kRec;
      const uint8_t* codes = rec + size_t(cs - j0) * 64;  // + m * tc * 64: position m of chunk cs
      for (int t = 0; t < NT; ++t)
        for (int i = 0; i < n; ++i) acc16[t][i][0] = acc16[t][i][1] = _mm512_setzero_si512();
      __m512i reg[kLutTile][2];  // NT == 1, whole tiles
#pragma GCC unroll 8
      for (int i = 0; i < kLutTile; ++i) reg[i][0] = reg[i][1] = _mm512_setzero_si512();
      for (int m = 0; m < kCode; ++m) {
        const uint8_t* xm = codes + size_t(m * tc) * 64;
        // Prefetch: the tile's lines (codes and scales) spread over its positions, in this thread's stream (its
        // tiles of block b, then the same tiles of block b + 1): into L1 kTernaryPrefetchBytes ahead and into L2
        // kLutL2PrefetchBytes ahead.
        const auto at = [&](int64_t v) {
          return reinterpret_cast<const char*>(v < span ? base_b + v : base_b + block_stride + (v - span));
        };
        for (int64_t e = std::min<int64_t>(tile_lines, pf_per_m * (m + 1)); pf_done < e; ++pf_done, pf_v += 64) {
          _mm_prefetch(at(pf_v), _MM_HINT_T0);
          _mm_prefetch(at(pf_v + kLutL2PrefetchBytes - kTernaryPrefetchBytes), _MM_HINT_T1);
        }
        if constexpr (NT == 1) {
          if (n == kLutTile) {  // one token, a whole tile: a fixed 8-chunk loop (GCC 12 still keeps the 16 sums in
                                // L1, as it did with named variables and with memory operands for half the table;
                                // 60 ns a chunk and block against 72-91 for the generic loop, one core from L2)
            const uint8_t* tm = tabs + 512 * m;
            const __m512i l0 = _mm512_load_si512(tm), l1 = _mm512_load_si512(tm + 64);
            const __m512i l2 = _mm512_load_si512(tm + 128), l3 = _mm512_load_si512(tm + 192);
            const __m512i h0 = _mm512_load_si512(tm + 256), h1 = _mm512_load_si512(tm + 320);
            const __m512i h2 = _mm512_load_si512(tm + 384), h3 = _mm512_load_si512(tm + 448);
#pragma GCC unroll 8
            for (int i = 0; i < kLutTile; ++i) {
              const __m512i x = _mm512_load_si512(xm + 64 * i);
              const __mmask64 khi = _mm512_movepi8_mask(x), klo = _knot_mask64(khi);
              const __m512i lo = _mm512_mask2_permutex2var_epi8(l2, _mm512_mask2_permutex2var_epi8(l0, x, klo, l1), khi, l3);
              const __m512i hi = _mm512_mask2_permutex2var_epi8(h2, _mm512_mask2_permutex2var_epi8(h0, x, klo, h1), khi, h3);
              reg[i][0] = _mm512_add_epi16(reg[i][0], _mm512_unpacklo_epi8(lo, hi));
              reg[i][1] = _mm512_add_epi16(reg[i][1], _mm512_unpackhi_epi8(lo, hi));
            }
            if ((m + 1) % kSeg != 0) continue;
#pragma GCC unroll 8
            for (int i = 0; i < kLutTile; ++i) {
              acc16[0][i][0] = reg[i][0], acc16[0][i][1] = reg[i][1];
              reg[i][0] = reg[i][1] = _mm512_setzero_si512();
            }
            goto flush;
          }
        }
#pragma GCC unroll 8
        for (int t = 0; t < NT; ++t) {
          const uint8_t* tm = tabs + t * kTab + 512 * m;
          const __m512i l0 = _mm512_load_si512(tm), l1 = _mm512_load_si512(tm + 64);
          const __m512i l2 = _mm512_load_si512(tm + 128), l3 = _mm512_load_si512(tm + 192);
          const __m512i h0 = _mm512_load_si512(tm + 256), h1 = _mm512_load_si512(tm + 320);
          const __m512i h2 = _mm512_load_si512(tm + 384), h3 = _mm512_load_si512(tm + 448);
          for (int i = 0; i < n; ++i) {
            const __m512i x = _mm512_load_si512(xm + 64 * i);
            const __mmask64 khi = _mm512_movepi8_mask(x), klo = _knot_mask64(khi);
            const __m512i lo = _mm512_mask2_permutex2var_epi8(l2, _mm512_mask2_permutex2var_epi8(l0, x, klo, l1), khi, l3);
            const __m512i hi = _mm512_mask2_permutex2var_epi8(h2, _mm512_mask2_permutex2var_epi8(h0, x, klo, h1), khi, h3);
            acc16[t][i][0] = _mm512_add_epi16(acc16[t][i][0], _mm512_unpacklo_epi8(lo, hi));
            acc16[t][i][1] = _mm512_add_epi16(acc16[t][i][1], _mm512_unpackhi_epi8(lo, hi));
          }
        }
        if ((m + 1) % kSeg != 0) continue;
      flush:
        for (int i = 0; i < n; ++i) {
          const int64_t c = cs + i;
          const uint8_t* d = rec + size_t(kCode * tc) * 64 + size_t(c - j0) * 128;  // + s * tc * 128: scale s
#pragma GCC unroll 8
          for (int t = 0; t < NT; ++t) {
            float* acc = accf + size_t(t * nch + (c - c0)) * kLutRows;
            __m512i sw[4];
            widen(acc16[t][i][0], acc16[t][i][1], sw);
            if constexpr (kType == DType::TQ1_0) {
              scale_into(sw, d, dx[t], acc);
            } else if constexpr (kType == DType::PTQ1_0) {  // a scale per segment (its 128-value block)
              scale_into(sw, d + (m + 1 == kSeg ? 0 : size_t(tc) * 128), dx[t], acc);
            } else if (m + 1 == kSeg) {  // TQ2_0: two 16-bit halves, one scale
              for (int j = 0; j < 4; ++j) first[t][i][j] = sw[j];
            } else {
              for (int j = 0; j < 4; ++j) sw[j] = _mm512_add_epi32(sw[j], first[t][i][j]);
              scale_into(sw, d, dx[t], acc);
            }
            acc16[t][i][0] = acc16[t][i][1] = _mm512_setzero_si512();
          }
        }
      }
    }
  }
  for (int t = 0; t < NT; ++t)
    for (int64_t c = 0; c < nch; ++c)
      std::memcpy(y + t * ldy + (c0 + c) * kLutRows, accf + size_t(t * nch + c) * kLutRows, kLutRows * sizeof(float));
}

template <DType kType>
void run_type(const PackedMatrix& p, int64_t c0, int64_t c1, const ActRow* act, int n_tok, float* y, int64_t ldy) {
  constexpr size_t kTab = size_t(kType == DType::TQ2_0 ? 64 : 52) * 512;
  thread_local std::vector<uint8_t> tab_buf;
  thread_local std::vector<float> acc_buf;
  tab_buf.resize(8 * kTab + 64);
  acc_buf.resize(size_t(8 * (c1 - c0) * kLutRows) + 16);
  uint8_t* tabs = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(tab_buf.data()) + 63) & ~uintptr_t(63));
  float* accf = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(acc_buf.data()) + 63) & ~uintptr_t(63));
  for (int t0 = 0; t0 < n_tok; t0 += 8) {
    const int nt = std::min(8, n_tok - t0);
    float* yt = y + t0 * ldy;
    switch (nt) {
      case 1: run_tile<kType, 1>(p, c0, c1, act + t0, yt, ldy, tabs, accf); break;
      case 2: run_tile<kType, 2>(p, c0, c1, act + t0, yt, ldy, tabs, accf); break;
      case 3: run_tile<kType, 3>(p, c0, c1, act + t0, yt, ldy, tabs, accf); break;
      case 4: run_tile<kType, 4>(p, c0, c1, act + t0, yt, ldy, tabs, accf); break;
      case 5: run_tile<kType, 5>(p, c0, c1, act + t0, yt, ldy, tabs, accf); break;
      case 6: run_tile<kType, 6>(p, c0, c1, act + t0, yt, ldy, tabs, accf); break;
      case 7: run_tile<kType, 7>(p, c0, c1, act + t0, yt, ldy, tabs, accf); break;
      default: run_tile<kType, 8>(p, c0, c1, act + t0, yt, ldy, tabs, accf); break;
    }
  }
}

}  // namespace

void ternary_lut_matmul_avx512vbmi(const PackedMatrix& p, int64_t c0, int64_t c1, const ActRow* act, int n_tok,
                                   float* y, int64_t ldy) {
  if (c1 <= c0 || n_tok <= 0) return;
  switch (p.type) {
    case DType::TQ1_0: return run_type<DType::TQ1_0>(p, c0, c1, act, n_tok, y, ldy);
    case DType::TQ2_0: return run_type<DType::TQ2_0>(p, c0, c1, act, n_tok, y, ldy);
    case DType::PTQ1_0: return run_type<DType::PTQ1_0>(p, c0, c1, act, n_tok, y, ldy);
    default: return;
  }
}

}  // namespace polykv::cpu
