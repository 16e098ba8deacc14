// Dot kernels for the legacy quant types (q4_0, q4_1, q5_0, q5_1, q8_0) against Q8_32 activations,
// written once over an integer-op policy `Ops` (AVX2 maddubs or AVX-512 VNNI dpbusd, see the
// *_avx2.cpp / *_avx512.cpp files that instantiate them). One block of 32 values is one 256-bit
// vector: its unsigned quants u (0..31) are unpacked once and multiplied with the activation bytes
// of each of the NT tokens into an int32x8 partial sum; the zero-point offset is subtracted exactly
// in integers via the activations' block sum, and the result is scaled by d_w * d_a into the
// token's float accumulator.
//
// Ops must provide (acc, results: int32x8 whose lane total is the sum that matters):
//   __m256i dot_u8s8(__m256i acc, __m256i u, __m256i s)       u in 0..127, s in -127..127
//   __m256i dot_s8s8(__m256i acc, __m256i w, __m256i s, int32_t sum_s)   w in -128..127
//   __m256i expand_bit5(uint32_t qh)     byte j = 0x10 if bit j of qh is set, else 0
// Small fixed loops carry `#pragma GCC unroll` so that the unpacked vectors stay in registers (-O2
// would keep them on the stack).
// Include only from an ISA TU. Internal linkage (see x86_common.h).
#pragma once
#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/x86_common.h"
#include "quant/blocks.h"

namespace polykv::cpu {
namespace {

// Float accumulators of NT tokens: two slots per token, block b going to slot b % 2, so that the FMAs
// of consecutive blocks do not wait on each other (FMA latency, not bandwidth, would bound a single
// token's one chain). The same two slots for every NT: a token's sum runs in one order whatever the
// call width (batch invariance, matmul_kernels.h).
template <int NT>
struct TokenAccumulators {
  __m256 v[NT][2];
  float scalar[NT][2] = {};
  TokenAccumulators() {
#pragma GCC unroll 8
    for (auto& t : v) t[0] = t[1] = _mm256_setzero_ps();
  }
  // Calls block(b, slot) for b = 0 .. n_blocks-1 with slot = b % 2, two blocks per iteration so that
  // the slot is a constant (the accumulators stay in registers).
  template <typename F>
  static void for_blocks(int64_t n_blocks, F&& block) {
    int64_t b = 0;
    for (; b + 2 <= n_blocks; b += 2) {
      block(b, 0);
      block(b + 1, 1);
    }
    if (b < n_blocks) block(b, 0);
  }
  void finish(float* out) const {
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t)
      out[t] = hsum_ps(_mm256_add_ps(v[t][0], v[t][1])) + (scalar[t][0] + scalar[t][1]);
  }
};

// Unsigned quants (0..15, or 0..31 with the fifth bits) of one q4/q5 block.
template <typename Ops, typename Block, bool kFiveBit>
inline __m256i unpack_q45(const Block& blk) {
  const __m256i u = unpack_nibbles(blk.qs);
  if constexpr (kFiveBit) return _mm256_or_si256(u, Ops::expand_bit5(load_u32(blk.qh)));
  else return u;
}

// q4_0 (kOffset 8) / q5_0 (kOffset 16): x = d * (u - kOffset).
template <typename Ops, typename Block, int kOffset>
struct LegacySym {
  template <int NT>
  static void run(const void* w_row, const ActRow* a, int64_t n, float* out) {
    const Block* w = static_cast<const Block*>(w_row);
    TokenAccumulators<NT> acc;
    acc.for_blocks(n / 32, [&](int64_t b, int k) __attribute__((always_inline)) {
      const __m256i u = unpack_q45<Ops, Block, kOffset == 16>(w[b]);
      const float dw = half_to_f32(w[b].d);
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) {
        const __m256i s = Ops::dot_u8s8(lane0_epi32(-kOffset * a[t].sum[b]), u, load256(a[t].qs + b * 32));
        acc.v[t][k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dw * a[t].d[b]), acc.v[t][k]);
      }
    });
    acc.finish(out);
  }
};

// q4_1 / q5_1: x = d * u + m, so the dot is d*da*Σ u·q + m*da*Σ q.
template <typename Ops, typename Block, bool kFiveBit>
struct LegacyMin {
  template <int NT>
  static void run(const void* w_row, const ActRow* a, int64_t n, float* out) {
    const Block* w = static_cast<const Block*>(w_row);
    TokenAccumulators<NT> acc;
    acc.for_blocks(n / 32, [&](int64_t b, int k) __attribute__((always_inline)) {
      const __m256i u = unpack_q45<Ops, Block, kFiveBit>(w[b]);
      const float dw = half_to_f32(w[b].d), mw = half_to_f32(w[b].m);
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) {
        const __m256i s = Ops::dot_u8s8(_mm256_setzero_si256(), u, load256(a[t].qs + b * 32));
        acc.v[t][k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dw * a[t].d[b]), acc.v[t][k]);
        acc.scalar[t][k] += mw * a[t].d[b] * float(a[t].sum[b]);
      }
    });
    acc.finish(out);
  }
};

template <typename Ops>
struct LegacyQ8_0 {
  template <int NT>
  static void run(const void* w_row, const ActRow* a, int64_t n, float* out) {
    const BlockQ8_0* w = static_cast<const BlockQ8_0*>(w_row);
    TokenAccumulators<NT> acc;
    acc.for_blocks(n / 32, [&](int64_t b, int k) __attribute__((always_inline)) {
      const __m256i q = load256(w[b].qs);
      const float dw = half_to_f32(w[b].d);
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) {
        const __m256i s = Ops::dot_s8s8(_mm256_setzero_si256(), q, load256(a[t].qs + b * 32), a[t].sum[b]);
        acc.v[t][k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dw * a[t].d[b]), acc.v[t][k]);
      }
    });
    acc.finish(out);
  }
};

template <typename Ops>
RowDotFn legacy_kernel(DType type) {
  switch (type) {
    case DType::Q4_0: return by_tokens<LegacySym<Ops, BlockQ4_0, 8>>;
    case DType::Q5_0: return by_tokens<LegacySym<Ops, BlockQ5_0, 16>>;
    case DType::Q4_1: return by_tokens<LegacyMin<Ops, BlockQ4_1, false>>;
    case DType::Q5_1: return by_tokens<LegacyMin<Ops, BlockQ5_1, true>>;
    case DType::Q8_0: return by_tokens<LegacyQ8_0<Ops>>;
    default: return nullptr;
  }
}

}  // namespace
}  // namespace polykv::cpu
