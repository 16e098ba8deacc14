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

// Float accumulators of NT tokens. A single token alternates two slots between consecutive blocks so
// that their FMAs do not wait on each other (FMA latency, not bandwidth, would bound one chain).
template <int NT>
struct TokenAccumulators {
  static constexpr int kSlots = NT == 1 ? 2 : NT;
  __m256 v[kSlots];
  float scalar[kSlots] = {};
  TokenAccumulators() {
    for (auto& x : v) x = _mm256_setzero_ps();
  }
  static int slot(int64_t block, int t) { return NT == 1 ? int(block & 1) : t; }
  void finish(float* out) const {
    if constexpr (NT == 1) {
      out[0] = hsum_ps(_mm256_add_ps(v[0], v[1])) + (scalar[0] + scalar[1]);
    } else {
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) out[t] = hsum_ps(v[t]) + scalar[t];
    }
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
    for (int64_t b = 0; b < n / 32; ++b) {
      const __m256i u = unpack_q45<Ops, Block, kOffset == 16>(w[b]);
      const float dw = half_to_f32(w[b].d);
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) {
        const __m256i s = Ops::dot_u8s8(lane0_epi32(-kOffset * a[t].sum[b]), u, load256(a[t].qs + b * 32));
        __m256& v = acc.v[acc.slot(b, t)];
        v = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dw * a[t].d[b]), v);
      }
    }
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
    for (int64_t b = 0; b < n / 32; ++b) {
      const __m256i u = unpack_q45<Ops, Block, kFiveBit>(w[b]);
      const float dw = half_to_f32(w[b].d), mw = half_to_f32(w[b].m);
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) {
        const __m256i s = Ops::dot_u8s8(_mm256_setzero_si256(), u, load256(a[t].qs + b * 32));
        const int k = acc.slot(b, t);
        acc.v[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dw * a[t].d[b]), acc.v[k]);
        acc.scalar[k] += mw * a[t].d[b] * float(a[t].sum[b]);
      }
    }
    acc.finish(out);
  }
};

template <typename Ops>
struct LegacyQ8_0 {
  template <int NT>
  static void run(const void* w_row, const ActRow* a, int64_t n, float* out) {
    const BlockQ8_0* w = static_cast<const BlockQ8_0*>(w_row);
    TokenAccumulators<NT> acc;
    for (int64_t b = 0; b < n / 32; ++b) {
      const __m256i q = load256(w[b].qs);
      const float dw = half_to_f32(w[b].d);
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) {
        const __m256i s = Ops::dot_s8s8(_mm256_setzero_si256(), q, load256(a[t].qs + b * 32), a[t].sum[b]);
        __m256& v = acc.v[acc.slot(b, t)];
        v = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dw * a[t].d[b]), v);
      }
    }
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
