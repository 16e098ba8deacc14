// AVX-512 VNNI group kernels for the x16 packed layout (packed_weights.h): 16 rows × NT tokens.
//
// Per block (32 values) and token: chunk c of the 16 rows is one 512-bit vector of unsigned quants
// (lane r = 4 quants of row r), multiplied by the token's chunk c broadcast to all lanes (a dword
// broadcast folded into vpdpbusd's memory operand). After the block's 4+4 (q4_0) or 8 (q8_0) chunks,
// lane r holds Σ u·a for row r; the zero point (u - 8 resp. u - 128; mxfp4: table values u = k + 12,
// offset 12) is removed exactly by starting
// the sum at -offset * Σa; the int32 lanes are then scaled by d_w[r] * d_a into the token's float
// accumulator. Weights are unpacked once per block and reused by every token (prefill), and the
// 16 row results of a token are stored with one vector store.
// Loops over chunks and tokens are fully unrolled (#pragma GCC unroll) so that weights and
// accumulators live in zmm registers; -O2 would otherwise keep the arrays on the stack.
// gcc 12's own avx512fintrin.h trips -Wuninitialized on its _mm512_undefined_* helpers (a known
// false positive in the compiler headers, not in this file).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstddef>
#include <cstring>

#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/packed_weights.h"
#include "quant/mxfp4.h"

namespace polykv::cpu {
namespace {

inline __m512i bcast_chunk(const int8_t* a, int c) {
  int32_t v;
  std::memcpy(&v, a + 4 * c, 4);
  return _mm512_set1_epi32(v);
}

inline __m512 fp16_scales(const uint16_t* dp) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(dp)));
}

// Unsigned quant vectors of one packed block: w[c] = chunk c of the 16 rows; scales(dp): the 16 rows'
// weight scales of the block.
struct UnpackQ4_0 {
  static __m512 scales(const uint16_t* dp) { return fp16_scales(dp); }
  static constexpr int kChunks = 8;
  static constexpr size_t kQsBytes = 256;
  static constexpr int32_t kOffset = 8;
  static void run(const uint8_t* qs, __m512i* w) {
    const __m512i lo = _mm512_set1_epi8(0x0F);
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m512i v = _mm512_load_si512(qs + 64 * c);
      w[c] = _mm512_and_si512(v, lo);
      w[c + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), lo);
    }
  }
};
// mxfp4: the nibbles (codes) looked up as u = kMxfp4Values[code] + 12 (0..24), offset 12.
struct UnpackMXFP4 {
  static constexpr int kChunks = 8;
  static constexpr size_t kQsBytes = 256;
  static constexpr int32_t kOffset = 12;
  // A constant (a table built in a stack array per block would stall store forwarding).
  alignas(16) static constexpr int8_t kTable[16] = {12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0};
  static void run(const uint8_t* qs, __m512i* w) {
    const __m512i table = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kTable)));
    const __m512i lo = _mm512_set1_epi8(0x0F);
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m512i v = _mm512_load_si512(qs + 64 * c);
      w[c] = _mm512_shuffle_epi8(table, _mm512_and_si512(v, lo));
      w[c + 4] = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(v, 4), lo));
    }
  }
  // The 16 rows' scales 2^(e - 128) from the exponents (quant/mxfp4.h mxfp4_scale, bit for bit).
  static __m512 scales(const uint16_t* dp) {
    const __m512i e = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(dp)));
    const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
    const __m512i subnormal = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
    return _mm512_castsi512_ps(_mm512_mask_blend_epi32(_mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2)), normal, subnormal));
  }
};
static_assert([] {
  for (int c = 0; c < 16; ++c)
    if (UnpackMXFP4::kTable[c] != kMxfp4Values[c] + UnpackMXFP4::kOffset) return false;
  return true;
}());
struct UnpackQ8_0 {
  static __m512 scales(const uint16_t* dp) { return fp16_scales(dp); }
  static constexpr int kChunks = 8;
  static constexpr size_t kQsBytes = 512;
  static constexpr int32_t kOffset = 128;
  static void run(const uint8_t* qs, __m512i* w) {
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) w[c] = _mm512_load_si512(qs + 64 * c);
  }
};

// kZp: the tokens carry ActRow::zp (matmul() fills it for these kernels): each (block, token) sum
// starts at zp[b] = -kOffset * sum[b], a broadcast load, instead of a multiply and a broadcast from a
// general register (one ALU uop of ~12 per token and block, issue #10). Same integer, same bits.
template <typename Unpack, bool kZp>
struct PackedKernel {
  template <int NT>
  static void run(const PackedMatrix& p, int64_t g, const ActRow* act, float* y, int64_t ldy) {
    const int64_t nb = p.n_blocks();
    __m512 acc[NT];
#pragma GCC unroll 8
    for (auto& v : acc) v = _mm512_setzero_ps();
    const uint8_t* qs = p.qs_at(g, 0);
    const uint16_t* dp = p.d_at(g, 0);
    const size_t qs_step = p.qs_block_bytes();
    for (int64_t b = 0; b < nb; ++b, qs += qs_step, dp += kPackRows) {
      __m512i w[Unpack::kChunks];
      Unpack::run(qs, w);
      const __m512 dw = Unpack::scales(dp);
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) {
        const int8_t* a = act[t].qs + 32 * b;
        // One vpdpbusd chain per token and block: the NT tokens' (and, out of order, the next
        // blocks') chains are independent, which hides the latency.
        __m512i s = kZp ? _mm512_set1_epi32(act[t].zp[b]) : _mm512_set1_epi32(-Unpack::kOffset * act[t].sum[b]);
#pragma GCC unroll 8
        for (int c = 0; c < Unpack::kChunks; ++c) s = _mm512_dpbusd_epi32(s, w[c], bcast_chunk(a, c));
        const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(act[t].d[b]));
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), scale, acc[t]);
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) _mm512_storeu_ps(y + t * ldy, acc[t]);
  }
};

// The same arithmetic as PackedKernel<Unpack, true> (the same instructions per (block, token) in the
// same order: the same bits), for tokens laid out as matmul() lays them out: token t's record at
// base + t * stride, its qs at offset 0, d at off_d and zp at off_zp. With one base pointer per
// block part instead of three pointers per token, the 8-token kernel's addresses fit the general
// registers (with a pointer per token and part, GCC moved them through xmm registers: ~4 vmovq, p05
// uops, per token and block at NT >= 4; issue #10).
template <typename Unpack, bool kPrefetch>
struct PackedKernelStrided {
  template <int NT>
  static void run(const PackedMatrix& p, int64_t g, const char* base, ptrdiff_t stride, ptrdiff_t off_d,
                  ptrdiff_t off_zp, float* y, int64_t ldy, ptrdiff_t pf) {
    const int64_t nb = p.n_blocks();
    __m512 acc[NT];
#pragma GCC unroll 8
    for (auto& v : acc) v = _mm512_setzero_ps();
    const uint8_t* qs = p.qs_at(g, 0);
    const uint16_t* dp = p.d_at(g, 0);
    const size_t qs_step = p.qs_block_bytes();
    const char* qa = base;           // token 0's quants of block b
    const char* da = base + off_d;   // token 0's d[b]
    const char* za = base + off_zp;  // token 0's zp[b]
    for (int64_t b = 0; b < nb; ++b, qs += qs_step, dp += kPackRows, qa += 32, da += 4, za += 4) {
      if constexpr (kPrefetch) {
        // Every line of the block pf bytes ahead (past this group's end: the next group's, which
        // this thread reads next; a prefetch never faults), and the scales' line every other block
        // (16 x 2 bytes a block; pf / (kQsBytes / 32) bytes ahead in that array).
        const char* q = reinterpret_cast<const char*>(qs) + pf;
#pragma GCC unroll 8
        for (size_t o = 0; o < Unpack::kQsBytes; o += 64) _mm_prefetch(q + o, _MM_HINT_T0);
        if ((b & 1) == 0)
          _mm_prefetch(reinterpret_cast<const char*>(dp) + pf / ptrdiff_t(Unpack::kQsBytes / 32), _MM_HINT_T0);
      }
      __m512i w[Unpack::kChunks];
      Unpack::run(qs, w);
      const __m512 dw = Unpack::scales(dp);
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) {
        const int8_t* a = reinterpret_cast<const int8_t*>(qa + t * stride);
        int32_t zp;
        float d;
        std::memcpy(&zp, za + t * stride, 4);
        std::memcpy(&d, da + t * stride, 4);
        __m512i s = _mm512_set1_epi32(zp);
#pragma GCC unroll 8
        for (int c = 0; c < Unpack::kChunks; ++c) s = _mm512_dpbusd_epi32(s, w[c], bcast_chunk(a, c));
        const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(d));
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), scale, acc[t]);
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) _mm512_storeu_ps(y + t * ldy, acc[t]);
  }
};

template <typename K>
void by_packed_tokens(const PackedMatrix& p, int64_t g, const ActRow* act, int n_tok, float* y, int64_t ldy) {
  switch (n_tok) {
    case 1: K::template run<1>(p, g, act, y, ldy); break;
    case 2: K::template run<2>(p, g, act, y, ldy); break;
    case 3: K::template run<3>(p, g, act, y, ldy); break;
    case 4: K::template run<4>(p, g, act, y, ldy); break;
    case 5: K::template run<5>(p, g, act, y, ldy); break;
    case 6: K::template run<6>(p, g, act, y, ldy); break;
    case 7: K::template run<7>(p, g, act, y, ldy); break;
    default: K::template run<8>(p, g, act, y, ldy); break;
  }
}
static_assert(kMaxPackedTokens == 8, "by_packed_tokens handles 1..8 tokens");

// Software prefetch of the weight stream (issue #10). Without it the multi-token kernels lose memory
// bandwidth on this VM (AMD Zen 5, 2 vCPUs): at k = 1 the stream runs near the DRAM rate because the
// core issues little work per byte; each extra token adds 11 vector uops per block, fewer blocks fit
// the out-of-order window, fewer cache lines are in flight, and the stream slows (verify_matmul_bench,
// q8_0, 1.3 GB of weights: k = 8 at ~1.9x the k = 1 time). Touching every line kPrefetchBlocks
// blocks (8 KB for q8_0, 4 KB for q4_0 / mxfp4) ahead keeps the lines in flight whatever the compute
// (k = 8 ~1.1-1.2x). A prefetch changes no arithmetic: the same bits with and without.
// POLYKV_PACKED_PF=<bytes> sets the distance (0: no prefetch, for A/B runs: bench/verify_cost.sh).
constexpr int kPrefetchBlocks = 16;
template <typename Unpack>
ptrdiff_t packed_prefetch_bytes() {
  static const ptrdiff_t pf = packed_prefetch_env(ptrdiff_t(kPrefetchBlocks * Unpack::kQsBytes));
  return pf;
}

template <typename Unpack, bool kPf>
void strided_tokens(const PackedMatrix& p, int64_t g, const ActRow* act, int n_tok, float* y, int64_t ldy,
                    ptrdiff_t pf) {
  using K = PackedKernelStrided<Unpack, kPf>;
  const char* base = reinterpret_cast<const char*>(act[0].qs);
  const ptrdiff_t stride = n_tok > 1 ? reinterpret_cast<const char*>(act[1].qs) - base : 0;
  const ptrdiff_t off_d = reinterpret_cast<const char*>(act[0].d) - base;
  const ptrdiff_t off_zp = reinterpret_cast<const char*>(act[0].zp) - base;
  switch (n_tok) {
    case 1: K::template run<1>(p, g, base, stride, off_d, off_zp, y, ldy, pf); break;
    case 2: K::template run<2>(p, g, base, stride, off_d, off_zp, y, ldy, pf); break;
    case 3: K::template run<3>(p, g, base, stride, off_d, off_zp, y, ldy, pf); break;
    case 4: K::template run<4>(p, g, base, stride, off_d, off_zp, y, ldy, pf); break;
    case 5: K::template run<5>(p, g, base, stride, off_d, off_zp, y, ldy, pf); break;
    case 6: K::template run<6>(p, g, base, stride, off_d, off_zp, y, ldy, pf); break;
    case 7: K::template run<7>(p, g, base, stride, off_d, off_zp, y, ldy, pf); break;
    default: K::template run<8>(p, g, base, stride, off_d, off_zp, y, ldy, pf); break;
  }
}

// True if the n_tok tokens carry zp and sit at one stride with the same offsets of d and zp (as
// matmul() lays them out), so that PackedKernelStrided applies.
bool uniform_layout(const ActRow* act, int n_tok) {
  if (!act[0].zp) return false;
  const char* b0 = reinterpret_cast<const char*>(act[0].qs);
  const ptrdiff_t stride = n_tok > 1 ? reinterpret_cast<const char*>(act[1].qs) - b0 : 0;
  for (int t = 0; t < n_tok; ++t) {
    const char* bt = reinterpret_cast<const char*>(act[t].qs);
    if (!act[t].zp || bt != b0 + t * stride ||
        reinterpret_cast<const char*>(act[t].d) - bt != reinterpret_cast<const char*>(act[0].d) - b0 ||
        reinterpret_cast<const char*>(act[t].zp) - bt != reinterpret_cast<const char*>(act[0].zp) - b0)
      return false;
  }
  return true;
}

// The tokens of one call come from one matmul: all carry zp or none does.
template <typename Unpack>
void by_zp(const PackedMatrix& p, int64_t g, const ActRow* act, int n_tok, float* y, int64_t ldy) {
  if (uniform_layout(act, n_tok)) {
    const ptrdiff_t pf = packed_prefetch_bytes<Unpack>();
    if (pf != 0) strided_tokens<Unpack, true>(p, g, act, n_tok, y, ldy, pf);
    else strided_tokens<Unpack, false>(p, g, act, n_tok, y, ldy, 0);
  } else if (act[0].zp) by_packed_tokens<PackedKernel<Unpack, true>>(p, g, act, n_tok, y, ldy);
  else by_packed_tokens<PackedKernel<Unpack, false>>(p, g, act, n_tok, y, ldy);
}
static_assert(UnpackQ4_0::kOffset == packed_zero_point(DType::Q4_0) &&
              UnpackQ8_0::kOffset == packed_zero_point(DType::Q8_0) &&
              UnpackMXFP4::kOffset == packed_zero_point(DType::MXFP4));

}  // namespace

PackedDotFn packed_dot_q4_K_avx512();  // packed_q4k_avx512.cpp

PackedDotFn packed_dot_avx512(DType type) {
  switch (type) {
    case DType::Q4_K: return packed_dot_q4_K_avx512();
    case DType::Q4_0: return by_zp<UnpackQ4_0>;
    case DType::Q8_0: return by_zp<UnpackQ8_0>;
    case DType::MXFP4: return by_zp<UnpackMXFP4>;
    default: return nullptr;
  }
}

}  // namespace polykv::cpu
