// AVX2 group kernels for the x16 packed layout (packed_weights.h), shared by packed_kernels_avx2.cpp
// (vpmaddubsw + vpmaddwd) and packed_kernels_avxvnni.cpp (AVX-VNNI vpdpbusd on ymm): one template,
// the integer dot step a policy. Include only from those two files (internal linkage, each compiled
// for its own ISA).
//
// A 64-byte chunk vector of the layout is two ymm halves: rows 0..7 and rows 8..15 of the group. A
// call runs each half in turn, for up to 4 tokens at a time (8 int32 sums + 4 float accumulators
// + the weight and activation vectors fit the 16 ymm registers): per block, chunk c of the 8 rows
// (lane r = 4 quants of row r) meets the token's chunk c broadcast to every lane.
//
// mxfp4 runs q4_0's path with one more step: each nibble (code) is looked up as u = k + 12 (0..24,
// the AVX-512 kernel's table, pshufb within each 128-bit lane), the sums start at -12 Σa, and the 8
// rows' scales 2^(e - 128) are built from the exponent bytes.
//
// Exactness and order: the block's integer sum Σ q·a per row and token is exact whichever policy
// computes it (vpmaddubsw cannot saturate here: q4_0 multiplies quants 0..15, mxfp4 0..24, q8_0
// |q| <= 128 by |a| <= 127), and then, as in the AVX-512 kernel, acc = fma(float(sum), d_w * d_a, acc) block after
// block. So a (row, token) result does not depend on the tokens sharing the call (batch invariance),
// and it equals the AVX-512 packed kernel's bit for bit.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/packed_kquant_avx2.h"
#include "backend/cpu/packed_weights.h"
#include "quant/mxfp4.h"

namespace polykv::cpu {
namespace {

// The three byte layouts of the x16 packing that share these kernels (packed_weights.h).
enum class PackKind { Q4_0, Q8_0, MXFP4 };

// mxfp4's lookup u = kMxfp4Values[code] + 12, in both 128-bit lanes (a constant: a table built in a
// stack array per block would stall store forwarding).
alignas(16) inline constexpr int8_t kPackedMxfp4Table[16] = {12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0};
static_assert([] {
  for (int c = 0; c < 16; ++c)
    if (kPackedMxfp4Table[c] != kMxfp4Values[c] + 12) return false;
  return true;
}());

// The 8 rows' weight scales of a block: fp16 d (q4_0, q8_0) or 2^(e - 128) from the exponent bytes
// (mxfp4; quant/mxfp4.h mxfp4_scale bit for bit: e < 2 is subnormal).
template <PackKind K>
[[gnu::always_inline]] inline __m256 packed_scales8(const uint16_t* dp) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(dp));
  if constexpr (K != PackKind::MXFP4) {
    return _mm256_cvtph_ps(v);
  } else {
    const __m256i e = _mm256_cvtepu16_epi32(v);
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    const __m256i subnormal = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    const __m256i is_sub = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, subnormal, is_sub));
  }
}

[[gnu::always_inline]] inline __m256i bcast_chunk(const int8_t* a, int c) {
  int32_t v;
  std::memcpy(&v, a + 4 * c, 4);
  return _mm256_set1_epi32(v);
}

// Software prefetch distance of the weight stream (POLYKV_PACKED_PF=<bytes>, 0: none), default 16 blocks as
// the AVX-512 kernels (packed_kernels_avx512.cpp says why); issued by the first half's pass only (the second
// re-reads the group from cache): each block's quant lines, and its scales' line every other block.
template <PackKind K>
ptrdiff_t half_prefetch_bytes(size_t qs_step) {
  static const ptrdiff_t pf = packed_prefetch_env(ptrdiff_t(16 * qs_step));
  return pf;
}

// Rows 8h .. 8h+7 of group g against NT <= 4 tokens; Dot: the integer policy (init / dot4 / prep8 /
// dot8, see the two .cpp files; the k-quant kernels of packed_kquant_avx2.h use its kq_* part).
template <typename Dot, PackKind K>
struct HalfGroup {
  static constexpr bool kQ4 = K != PackKind::Q8_0;  // nibbles (q4_0, mxfp4) or bytes (q8_0)
  static constexpr int32_t kOffset = K == PackKind::Q4_0 ? 8 : K == PackKind::MXFP4 ? 12 : 128;
  template <int NT>
  [[gnu::always_inline]] static inline void run(const PackedMatrix& p, int64_t g, int h, const ActRow* act, float* y,
                                                int64_t ldy) {
    const int64_t nb = p.n_blocks();
    const size_t qs_step = p.qs_block_bytes();
    const uint8_t* qs = p.qs_at(g, 0) + 32 * h;
    const uint16_t* dp = p.d_at(g, 0) + 8 * h;
    __m256 acc[NT];
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
    const ptrdiff_t pf = h == 0 ? half_prefetch_bytes<K>(qs_step) : 0;
    for (int64_t b = 0; b < nb; ++b, qs += qs_step, dp += kPackRows) {
      if (pf != 0) {  // h == 0: qs and dp are the block's own
        for (size_t o = 0; o < qs_step; o += 64) _mm_prefetch(reinterpret_cast<const char*>(qs) + pf + o, _MM_HINT_T0);
        if ((b & 1) == 0)
          _mm_prefetch(reinterpret_cast<const char*>(dp) + pf / ptrdiff_t(qs_step / 32), _MM_HINT_T0);
      }
      __m256i s[NT];
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) s[t] = Dot::init(kOffset, act[t].sum[b]);
      if constexpr (kQ4) {
        const __m256i lo = _mm256_set1_epi8(0x0F);
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) {
          const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(qs + 64 * c));
          __m256i w0 = _mm256_and_si256(v, lo), w1 = _mm256_and_si256(_mm256_srli_epi16(v, 4), lo);
          if constexpr (K == PackKind::MXFP4) {
            const __m256i table =
                _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(kPackedMxfp4Table)));
            w0 = _mm256_shuffle_epi8(table, w0);
            w1 = _mm256_shuffle_epi8(table, w1);
          }
#pragma GCC unroll 4
          for (int t = 0; t < NT; ++t) {
            const int8_t* a = act[t].qs + 32 * b;
            s[t] = Dot::dot4(s[t], w0, bcast_chunk(a, c));
            s[t] = Dot::dot4(s[t], w1, bcast_chunk(a, c + 4));
          }
        }
      } else {
#pragma GCC unroll 8
        for (int c = 0; c < 8; ++c) {
          const auto w = Dot::prep8(_mm256_load_si256(reinterpret_cast<const __m256i*>(qs + 64 * c)));
#pragma GCC unroll 4
          for (int t = 0; t < NT; ++t) s[t] = Dot::dot8(s[t], w, bcast_chunk(act[t].qs + 32 * b, c));
        }
      }
      const __m256 dw = packed_scales8<K>(dp);
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t)
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[t]), _mm256_mul_ps(dw, _mm256_set1_ps(act[t].d[b])), acc[t]);
    }
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) _mm256_storeu_ps(y + t * ldy + 8 * h, acc[t]);
  }
};

// NT <= 4 tokens, both halves.
template <typename Dot, PackKind K, int NT>
void group_tokens(const PackedMatrix& p, int64_t g, const ActRow* act, float* y, int64_t ldy) {
  HalfGroup<Dot, K>::template run<NT>(p, g, 0, act, y, ldy);
  HalfGroup<Dot, K>::template run<NT>(p, g, 1, act, y, ldy);
}

template <typename Dot, PackKind K>
void group_upto4(const PackedMatrix& p, int64_t g, const ActRow* act, int n_tok, float* y, int64_t ldy) {
  switch (n_tok) {
    case 1: group_tokens<Dot, K, 1>(p, g, act, y, ldy); break;
    case 2: group_tokens<Dot, K, 2>(p, g, act, y, ldy); break;
    case 3: group_tokens<Dot, K, 3>(p, g, act, y, ldy); break;
    default: group_tokens<Dot, K, 4>(p, g, act, y, ldy); break;
  }
}

// PackedDotFn: 1..8 tokens as passes of at most 4 (each token's arithmetic is the same in any pass).
template <typename Dot, PackKind K>
void packed_group(const PackedMatrix& p, int64_t g, const ActRow* act, int n_tok, float* y, int64_t ldy) {
  for (int t = 0; t < n_tok; t += 4) group_upto4<Dot, K>(p, g, act + t, std::min(4, n_tok - t), y + t * ldy, ldy);
}
static_assert(kMaxPackedTokens == 8);

template <typename Dot>
PackedDotFn packed_table(DType type) {
  switch (type) {
    case DType::Q4_0: return packed_group<Dot, PackKind::Q4_0>;
    case DType::Q8_0: return packed_group<Dot, PackKind::Q8_0>;
    case DType::MXFP4: return packed_group<Dot, PackKind::MXFP4>;
    case DType::Q4_K: return kq_packed_group<Q4KHalf, Dot>;
    case DType::Q5_K: return kq_packed_group<Q5KHalf, Dot>;
    case DType::Q6_K: return kq_packed_group<Q6KHalf, Dot>;
    default: return nullptr;
  }
}

}  // namespace
}  // namespace polykv::cpu
