// Dot kernels for the legacy quant types (q4_0, q4_1, q5_0, q5_1, q8_0) against Q8_32 activations,
// written once over an integer-op policy `Ops` (AVX2 maddubs or AVX-512 VNNI dpbusd, see the
// *_avx2.cpp / *_avx512.cpp files that instantiate them). One block of 32 values is one 256-bit
// vector: its unsigned quants u (0..31) times the activation bytes give an int32x8 partial sum, the
// zero-point offset is subtracted exactly in integers via the activations' block sum, and the
// result is scaled by d_w * d_a into a float accumulator.
//
// Ops must provide (acc, results: int32x8 whose lane total is the sum that matters):
//   __m256i dot_u8s8(__m256i acc, __m256i u, __m256i s)       u in 0..127, s in -127..127
//   __m256i dot_s8s8(__m256i acc, __m256i w, __m256i s, int32_t sum_s)   w in -128..127
//   __m256i expand_bit5(uint32_t qh)     byte j = 0x10 if bit j of qh is set, else 0
// Include only from an ISA TU, after x86_common.h. Internal linkage (see x86_common.h).
#pragma once
#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/x86_common.h"
#include "quant/blocks.h"

namespace polykv::cpu {
namespace {

// q4_0 (kOffset 8) / q5_0 (kOffset 16): x = d * (u - kOffset).
template <typename Ops, typename Block, int kOffset>
float legacy_dot_sym(const void* w_row, const ActRow& a, int64_t n) {
  const Block* w = static_cast<const Block*>(w_row);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / 32; ++b) {
    __m256i u = unpack_nibbles(w[b].qs);
    if constexpr (kOffset == 16) u = _mm256_or_si256(u, Ops::expand_bit5(load_u32(w[b].qh)));
    const __m256i s = Ops::dot_u8s8(lane0_epi32(-kOffset * a.sum[b]), u, load256(a.qs + b * 32));
    const __m256 dd = _mm256_set1_ps(half_to_f32(w[b].d) * a.d[b]);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), dd, acc);
  }
  return hsum_ps(acc);
}

// q4_1 / q5_1: x = d * u + m, so the dot is d*da*Σ u·q + m*da*Σ q.
template <typename Ops, typename Block, bool kFiveBit>
float legacy_dot_min(const void* w_row, const ActRow& a, int64_t n) {
  const Block* w = static_cast<const Block*>(w_row);
  __m256 acc = _mm256_setzero_ps();
  float acc_m = 0.0f;
  for (int64_t b = 0; b < n / 32; ++b) {
    __m256i u = unpack_nibbles(w[b].qs);
    if constexpr (kFiveBit) u = _mm256_or_si256(u, Ops::expand_bit5(load_u32(w[b].qh)));
    const __m256i s = Ops::dot_u8s8(_mm256_setzero_si256(), u, load256(a.qs + b * 32));
    const __m256 dd = _mm256_set1_ps(half_to_f32(w[b].d) * a.d[b]);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), dd, acc);
    acc_m += half_to_f32(w[b].m) * a.d[b] * float(a.sum[b]);
  }
  return hsum_ps(acc) + acc_m;
}

template <typename Ops>
float legacy_dot_q8_0(const void* w_row, const ActRow& a, int64_t n) {
  const BlockQ8_0* w = static_cast<const BlockQ8_0*>(w_row);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / 32; ++b) {
    const __m256i s =
        Ops::dot_s8s8(_mm256_setzero_si256(), load256(w[b].qs), load256(a.qs + b * 32), a.sum[b]);
    const __m256 dd = _mm256_set1_ps(half_to_f32(w[b].d) * a.d[b]);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), dd, acc);
  }
  return hsum_ps(acc);
}

template <typename Ops>
VecDotFn legacy_kernel(DType type) {
  switch (type) {
    case DType::Q4_0: return legacy_dot_sym<Ops, BlockQ4_0, 8>;
    case DType::Q5_0: return legacy_dot_sym<Ops, BlockQ5_0, 16>;
    case DType::Q4_1: return legacy_dot_min<Ops, BlockQ4_1, false>;
    case DType::Q5_1: return legacy_dot_min<Ops, BlockQ5_1, true>;
    case DType::Q8_0: return legacy_dot_q8_0<Ops>;
    default: return nullptr;
  }
}

}  // namespace
}  // namespace polykv::cpu
