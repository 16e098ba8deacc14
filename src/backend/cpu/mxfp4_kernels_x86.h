// MXFP4 dot kernel (mxfp4_kernels.h) written once over an integer op policy `Ops` and instantiated
// by the AVX2 and AVX-512 TUs. One block of 32 values is one 256-bit vector: the nibbles are split
// (low nibbles = values 0..15, high = 16..31, unpack_nibbles) and looked up in a 16-entry byte table
// (pshufb, the same table in both 128-bit lanes) giving u = k + 12 in 0..24; per token
// Ops::dot_u8s8 multiplies u into the activation bytes, starting from -12 Σ q in lane 0 (so the
// lanes total Σ k q exactly), and the int32 lanes are scaled by 2^(e - 128) * d_act into the token's
// accumulator (TokenAccumulators: two slots per token, block b in slot b % 2, as the legacy kernels).
//
// Ops must provide:
//   __m256i dot_u8s8(__m256i acc, __m256i u, __m256i s)  acc + Σ over each int32 lane's 4 bytes u*s
// Include only from an ISA TU. Internal linkage (see x86_common.h).
#pragma once
#include "backend/cpu/legacy_kernels_x86.h"
#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/x86_common.h"
#include "quant/mxfp4.h"

namespace polykv::cpu {
namespace {

// 2^(e - 128) (quant/mxfp4.h mxfp4_scale) from the bits; e < 2 is subnormal.
inline float mxfp4_scale_fast(uint8_t e) {
  const uint32_t bits = e < 2 ? uint32_t(0x00200000u) << e : uint32_t(e - 1) << 23;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// The lookup table u = kMxfp4Values[c] + 12, in both 128-bit lanes (a constant: a table built in a
// stack array stalls store forwarding).
alignas(16) inline constexpr int8_t kMxfp4OffsetTable[16] = {12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0};
static_assert([] {
  for (int c = 0; c < 16; ++c)
    if (kMxfp4OffsetTable[c] != kMxfp4Values[c] + 12) return false;
  return true;
}());
inline __m256i mxfp4_offset_table() { return _mm256_broadcastsi128_si256(load128(kMxfp4OffsetTable)); }

template <typename Ops>
struct Mxfp4Q8_32 {
  template <int NT>
  static void run(const void* w_row, const ActRow* a, int64_t n, float* out) {
    const BlockMXFP4* w = static_cast<const BlockMXFP4*>(w_row);
    const __m256i table = mxfp4_offset_table();
    TokenAccumulators<NT> acc;
    acc.for_blocks(n / kQK_MXFP4, [&](int64_t b, int k) __attribute__((always_inline)) {
      const __m256i u = _mm256_shuffle_epi8(table, unpack_nibbles(w[b].qs));
      const float dw = mxfp4_scale_fast(w[b].e);
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) {
        const __m256i s = Ops::dot_u8s8(lane0_epi32(-12 * a[t].sum[b]), u, load256(a[t].qs + b * kQK_MXFP4));
        acc.v[t][k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dw * a[t].d[b]), acc.v[t][k]);
      }
    });
    acc.finish(out);
  }
};

template <typename Ops>
RowDotFn mxfp4_kernel(DType type) {
  return type == DType::MXFP4 ? by_tokens<Mxfp4Q8_32<Ops>> : nullptr;
}

}  // namespace
}  // namespace polykv::cpu
