// AVX-512 (F/BW/VL/DQ/VNNI) overrides of the AVX2 row kernels: q8_0/q4_0 K dots with VNNI
// (vpdpbusd on |k| and sign-adjusted q), q8_0/q4_0 decoders, 16-wide f32 dot/axpy and f16 rows (dot,
// axpy, decode). Everything else is
// the AVX2 table's. Rows whose hd is not a multiple of 16 use the AVX2 kernels.
// gcc 12's avx512fintrin.h trips -Wuninitialized on its _mm512_undefined_* helpers (a false
// positive in the compiler headers).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <iterator>

#include "backend/cpu/kv_row_ops.h"
#include "core/cpu_features.h"
#include "quant/blocks.h"

namespace polykv {
namespace {

float half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

__m256i load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// Eight int32 partial sums of k·q over 32 int8 pairs.
__m256i int8_dot(__m256i k, __m256i q) {
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(k), _mm256_sign_epi8(q, k));
}

__m256i q4_values(const uint8_t* row, int b) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + size_t(b) * sizeof(BlockQ4_0) + 2));
  const __m128i mask = _mm_set1_epi8(0x0F);
  const __m128i lo = _mm_and_si128(packed, mask), hi = _mm_and_si128(_mm_srli_epi16(packed, 4), mask);
  return _mm256_sub_epi8(_mm256_set_m128i(hi, lo), _mm256_set1_epi8(8));
}

float q8_dot(const uint8_t* k, const uint8_t* qp, int hd) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  const int nb = hd / kQK32;
  int b = 0;
  for (; b + 2 <= nb; b += 2) {  // two independent chains
    const uint8_t* k0 = k + size_t(b) * sizeof(BlockQ8_0);
    const uint8_t* q0 = qp + size_t(b) * sizeof(BlockQ8_0);
    const uint8_t* k1 = k0 + sizeof(BlockQ8_0);
    const uint8_t* q1 = q0 + sizeof(BlockQ8_0);
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(half(k0) * half(q0)),
                           _mm256_cvtepi32_ps(int8_dot(load32(k0 + 2), load32(q0 + 2))), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_set1_ps(half(k1) * half(q1)),
                           _mm256_cvtepi32_ps(int8_dot(load32(k1 + 2), load32(q1 + 2))), acc1);
  }
  for (; b < nb; ++b) {
    const uint8_t* k0 = k + size_t(b) * sizeof(BlockQ8_0);
    const uint8_t* q0 = qp + size_t(b) * sizeof(BlockQ8_0);
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(half(k0) * half(q0)),
                           _mm256_cvtepi32_ps(int8_dot(load32(k0 + 2), load32(q0 + 2))), acc0);
  }
  return hsum(_mm256_add_ps(acc0, acc1));
}

float q4_dot(const uint8_t* k, const uint8_t* qp, int hd) {
  __m256 acc = _mm256_setzero_ps();
  for (int b = 0; b < hd / kQK32; ++b) {
    const uint8_t* q0 = qp + size_t(b) * sizeof(BlockQ8_0);
    const float d = half(k + size_t(b) * sizeof(BlockQ4_0)) * half(q0);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(int8_dot(q4_values(k, b), load32(q0 + 2))), acc);
  }
  return hsum(acc);
}

// One q8_0/q4_0 K row against n q8_0 queries with VNNI: each K block is loaded (and |k| formed) once.
template <bool kQ4>
void quant_dot_n(const uint8_t* k, const uint8_t* qp, size_t q_stride, int n, float* out, int hd) {
  constexpr size_t kBlock = kQ4 ? sizeof(BlockQ4_0) : sizeof(BlockQ8_0);
  for (int r0 = 0; r0 < n; r0 += 4) {
    const int m = std::min(4, n - r0);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int b = 0; b < hd / kQK32; ++b) {
      const __m256i kv = kQ4 ? q4_values(k, b) : load32(k + size_t(b) * kBlock + 2);
      const __m256i ak = _mm256_abs_epi8(kv);
      const float dk = half(k + size_t(b) * kBlock);
      for (int r = 0; r < m; ++r) {
        const uint8_t* q = qp + size_t(r0 + r) * q_stride + size_t(b) * sizeof(BlockQ8_0);
        const __m256i p32 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), ak, _mm256_sign_epi8(load32(q + 2), kv));
        acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(dk * half(q)), _mm256_cvtepi32_ps(p32), acc[r]);
      }
    }
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(acc[0], acc[1]), _mm256_hadd_ps(acc[2], acc[3]));
    float sums[4];
    _mm_storeu_ps(sums, _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
    for (int r = 0; r < m; ++r) out[r0 + r] = sums[r];
  }
}

// q8_0 row -> f32: per block d * q (the same products as the AVX2 axpy into zeros).
void q8_decode(const uint8_t* src, float* x, int hd) {
  for (int b = 0; b < hd / kQK32; ++b) {
    const uint8_t* blk = src + size_t(b) * sizeof(BlockQ8_0);
    const __m512 d = _mm512_set1_ps(half(blk));
    const __m256i q = load32(blk + 2);
    _mm512_storeu_ps(x + 32 * b, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(q)))));
    _mm512_storeu_ps(x + 32 * b + 16,
                     _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(q, 1)))));
  }
}

// q4_0 row -> f32: per block d * (nibble - 8), values in ggml order (low nibbles, then high).
void q4_decode(const uint8_t* src, float* x, int hd) {
  for (int b = 0; b < hd / kQK32; ++b) {
    const uint8_t* blk = src + size_t(b) * sizeof(BlockQ4_0);
    const __m512 d = _mm512_set1_ps(half(blk));
    const __m256i q = q4_values(src, b);  // int8 in -8..7
    _mm512_storeu_ps(x + 32 * b, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(q)))));
    _mm512_storeu_ps(x + 32 * b + 16,
                     _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(q, 1)))));
  }
}

template <bool kF16>
__m512 load16(const uint8_t* p, int i) {
  if constexpr (kF16) return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2 * size_t(i))));
  else return _mm512_loadu_ps(reinterpret_cast<const float*>(p) + i);
}

template <bool kF16>
float dot16(const uint8_t* k, const float* q, int n) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  int i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm512_fmadd_ps(load16<kF16>(k, i), _mm512_loadu_ps(q + i), acc0);
    acc1 = _mm512_fmadd_ps(load16<kF16>(k, i + 16), _mm512_loadu_ps(q + i + 16), acc1);
  }
  for (; i < n; i += 16) acc0 = _mm512_fmadd_ps(load16<kF16>(k, i), _mm512_loadu_ps(q + i), acc0);
  const __m512 a = _mm512_add_ps(acc0, acc1);
  return hsum(_mm256_add_ps(_mm512_castps512_ps256(a), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1))));
}

template <bool kF16>
void axpy16(float a, const uint8_t* v, float* acc, int n) {
  const __m512 va = _mm512_set1_ps(a);
  for (int i = 0; i < n; i += 16) _mm512_storeu_ps(acc + i, _mm512_fmadd_ps(va, load16<kF16>(v, i), _mm512_loadu_ps(acc + i)));
}

// The AVX2 table of the same type, for shapes these kernels do not cover.
const KvRowKernels& avx2(KvType t) { return *kv_row_kernels_avx2(t); }

float dot_f32(const float* x, const float* q, int hd) {
  if (hd % 16) return avx2(KvType::F32).dot_f32(x, q, hd);
  return dot16<false>(reinterpret_cast<const uint8_t*>(x), q, hd);
}
void axpy_f32(float a, const float* x, float* acc, int hd) {
  if (hd % 16) return avx2(KvType::F32).axpy_f32(a, x, acc, hd);
  axpy16<false>(a, reinterpret_cast<const uint8_t*>(x), acc, hd);
}
template <bool kF16>
float dot_row(const uint8_t* k, const uint8_t* qp, int hd) {
  if (hd % 16) return avx2(kF16 ? KvType::F16 : KvType::F32).dot(k, qp, hd);
  return dot16<kF16>(k, reinterpret_cast<const float*>(qp), hd);
}
template <bool kF16>
void axpy_row(float a, const uint8_t* v, float* acc, int hd) {
  if (hd % 16) return avx2(kF16 ? KvType::F16 : KvType::F32).axpy(a, v, acc, hd);
  axpy16<kF16>(a, v, acc, hd);
}

template <bool kF16>
void decode_row(const uint8_t* src, float* x, int hd) {
  if (hd % 16) return avx2(kF16 ? KvType::F16 : KvType::F32).decode(src, x, hd);
  for (int i = 0; i < hd; i += 16) _mm512_storeu_ps(x + i, load16<kF16>(src, i));
}

KvRowKernels make(KvType t) {
  KvRowKernels k = avx2(t);
  k.dot_f32 = dot_f32;
  k.axpy_f32 = axpy_f32;
  if (t == KvType::Q8_0) k.dot = q8_dot, k.dot_n = quant_dot_n<false>, k.decode = q8_decode;
  if (t == KvType::Q4_0) k.dot = q4_dot, k.dot_n = quant_dot_n<true>, k.decode = q4_decode;
  if (t == KvType::F16) k.dot = dot_row<true>, k.axpy = axpy_row<true>, k.decode = decode_row<true>;
  if (t == KvType::F32) k.dot = dot_row<false>, k.axpy = axpy_row<false>, k.decode = decode_row<false>;
  return k;
}

}  // namespace

const KvRowKernels* kv_row_kernels_avx512(KvType t) {
  if (!cpu_features().has_avx512_set()) return nullptr;
  static const KvRowKernels tables[] = {make(KvType::F32),    make(KvType::F16),    make(KvType::BF16),
                                        make(KvType::Q8_0),   make(KvType::Q4_0),   make(KvType::Turbo4),
                                        make(KvType::Turbo3), make(KvType::Turbo2),
                                        make(KvType::Turbo4T), make(KvType::Turbo3T), make(KvType::Turbo2T)};
  static_assert(std::size(tables) == std::size(kAllKvTypes));
  return &tables[int(t)];
}

}  // namespace polykv
