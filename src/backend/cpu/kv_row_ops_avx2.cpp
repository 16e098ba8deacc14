// AVX2 + FMA + F16C row kernels for every KV type. q8_0/q4_0 K rows are dotted with a q8_0 query in
// integers (maddubs on |k| and sign-adjusted q); turbo rows use the TurboQuant primitives for single
// rows and decode once for several queries. Tails (hd not a multiple of 8) go through scalar code.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/kv_row_ops.h"
#include "backend/cpu/x86_common.h"
#include "core/cpu_features.h"
#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/turbo.h"
#include "quant/turbo_trellis.h"
#include "quant/turbo_trellis_internal.h"

namespace polykv {
namespace {

using cpu::hsum_ps;

float half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return cpu::half_to_f32(h);
}

// ---- f32 / f16 / bf16 ----

template <KvType T>
__m256 load8(const uint8_t* p, int i) {
  if constexpr (T == KvType::F32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p) + i);
  } else if constexpr (T == KvType::F16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * size_t(i))));
  } else {  // bf16: the upper half of an f32
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * size_t(i))));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
  }
}

template <KvType T>
float load1(const uint8_t* p, int i) {
  if constexpr (T == KvType::F32) {
    float f;
    std::memcpy(&f, p + 4 * size_t(i), 4);
    return f;
  } else {
    uint16_t h;
    std::memcpy(&h, p + 2 * size_t(i), 2);
    return T == KvType::F16 ? fp16_to_f32(h) : bf16_to_f32(h);
  }
}

template <KvType T>
float float_dot(const uint8_t* k, const float* q, int n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(load8<T>(k, i), _mm256_loadu_ps(q + i), acc0);
    acc1 = _mm256_fmadd_ps(load8<T>(k, i + 8), _mm256_loadu_ps(q + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(load8<T>(k, i), _mm256_loadu_ps(q + i), acc0);
  float s = hsum_ps(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) s += load1<T>(k, i) * q[i];
  return s;
}

template <KvType T>
float float_dot_row(const uint8_t* k, const uint8_t* qp, int hd) {
  return float_dot<T>(k, reinterpret_cast<const float*>(qp), hd);
}

float dot_f32(const float* x, const float* q, int hd) {
  return float_dot<KvType::F32>(reinterpret_cast<const uint8_t*>(x), q, hd);
}

template <KvType T>
void float_axpy(float a, const uint8_t* v, float* acc, int n) {
  const __m256 va = _mm256_set1_ps(a);
  int i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(va, load8<T>(v, i), _mm256_loadu_ps(acc + i)));
  for (; i < n; ++i) acc[i] += a * load1<T>(v, i);
}

void axpy_f32(float a, const float* x, float* acc, int hd) {
  float_axpy<KvType::F32>(a, reinterpret_cast<const uint8_t*>(x), acc, hd);
}

// out[r] = x·q_r; four queries share each load of x and one combined horizontal reduction.
void dot_f32_n(const float* x, const float* q, size_t q_stride, int n, float* out, int hd) {
  if (hd % 8) {
    for (int r = 0; r < n; ++r) out[r] = dot_f32(x, q + size_t(r) * q_stride, hd);
    return;
  }
  int r = 0;
  for (; r + 4 <= n; r += 4) {
    const float* q0 = q + size_t(r) * q_stride;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int i = 0; i < hd; i += 8) {
      const __m256 xv = _mm256_loadu_ps(x + i);
      a0 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(q0 + i), a0);
      a1 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(q0 + q_stride + i), a1);
      a2 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(q0 + 2 * q_stride + i), a2);
      a3 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(q0 + 3 * q_stride + i), a3);
    }
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));  // per 128-bit lane
    _mm_storeu_ps(out + r, _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
  }
  for (; r < n; ++r) out[r] = dot_f32(x, q + size_t(r) * q_stride, hd);
}

// acc_r += a[r] * x, x loaded once per 8 values for all rows.
void axpy_f32_n(const float* a, const float* x, float* acc, size_t acc_stride, int n, int hd) {
  if (hd % 8) {
    for (int r = 0; r < n; ++r) axpy_f32(a[r], x, acc + size_t(r) * acc_stride, hd);
    return;
  }
  for (int i = 0; i < hd; i += 8) {
    const __m256 xv = _mm256_loadu_ps(x + i);
    for (int r = 0; r < n; ++r) {
      float* ar = acc + size_t(r) * acc_stride + i;
      _mm256_storeu_ps(ar, _mm256_fmadd_ps(_mm256_set1_ps(a[r]), xv, _mm256_loadu_ps(ar)));
    }
  }
}

// exp(x) for x <= 0 (x = s - max): 2^k * p(r), k = round(x / ln 2), r = x - k ln 2 in [-ln2/2, ln2/2],
// p the degree-6 Taylor polynomial (relative error < 2e-7). x < -87 (and -inf) gives 0.
__m256 exp_nonpositive(__m256 x) {
  const __m256 underflow = _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_LT_OQ);
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
  const __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693145752f), x);  // ln 2 split in two for accuracy
  r = _mm256_fnmadd_ps(k, _mm256_set1_ps(1.42860677e-6f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i e = _mm256_slli_epi32(_mm256_cvtps_epi32(k), 23);  // 2^k via the exponent field
  const __m256 y = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), e));
  return _mm256_andnot_ps(underflow, y);
}

float exp_sum(float* s, int n, float m) {
  const __m256 vm = _mm256_set1_ps(m);
  __m256 acc = _mm256_setzero_ps();
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 y = exp_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(s + i), vm));
    _mm256_storeu_ps(s + i, y);
    acc = _mm256_add_ps(acc, y);
  }
  float sum = hsum_ps(acc);
  for (; i < n; ++i) sum += (s[i] = std::exp(s[i] - m));
  return sum;
}

template <KvType T>
void float_decode(const uint8_t* src, float* x, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, load8<T>(src, i));
  for (; i < n; ++i) x[i] = load1<T>(src, i);
}

// ---- q8_0 / q4_0: blocks of 32 (hd is a multiple of 32) ----

// 32 signed values of block b of a q8_0 row.
__m256i q8_values(const uint8_t* row, int b) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + size_t(b) * sizeof(BlockQ8_0) + 2));
}

// 32 values of block b of a q4_0 row as int8 in -8..7, value order (low nibbles then high nibbles).
__m256i q4_values(const uint8_t* row, int b) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + size_t(b) * sizeof(BlockQ4_0) + 2));
  const __m128i mask = _mm_set1_epi8(0x0F);
  const __m128i lo = _mm_and_si128(packed, mask), hi = _mm_and_si128(_mm_srli_epi16(packed, 4), mask);
  return _mm256_sub_epi8(_mm256_set_m128i(hi, lo), _mm256_set1_epi8(8));
}

// Eight int32 partial sums of k·q over 32 int8 pairs (|k|, |q| <= 127 so maddubs cannot saturate).
__m256i int8_dot(__m256i k, __m256i q) {
  const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(k, k), _mm256_sign_epi8(q, k));
  return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

float q8_dot(const uint8_t* k, const uint8_t* qp, int hd) {
  __m256 acc = _mm256_setzero_ps();
  for (int b = 0; b < hd / kQK32; ++b) {
    const float d = half(k + size_t(b) * sizeof(BlockQ8_0)) * half(qp + size_t(b) * sizeof(BlockQ8_0));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(int8_dot(q8_values(k, b), q8_values(qp, b))), acc);
  }
  return hsum_ps(acc);
}

// One q8_0/q4_0 K row against n q8_0 queries: each K block is loaded (and |k| formed) once.
template <bool kQ4>
void quant_dot_n(const uint8_t* k, const uint8_t* qp, size_t q_stride, int n, float* out, int hd) {
  constexpr size_t kBlock = kQ4 ? sizeof(BlockQ4_0) : sizeof(BlockQ8_0);
  for (int r0 = 0; r0 < n; r0 += 4) {
    const int m = std::min(4, n - r0);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int b = 0; b < hd / kQK32; ++b) {
      const __m256i kv = kQ4 ? q4_values(k, b) : q8_values(k, b);
      const __m256i ak = _mm256_sign_epi8(kv, kv);
      const float dk = half(k + size_t(b) * kBlock);
      for (int r = 0; r < m; ++r) {
        const uint8_t* q = qp + size_t(r0 + r) * q_stride;
        const __m256i p16 = _mm256_maddubs_epi16(ak, _mm256_sign_epi8(q8_values(q, b), kv));
        const __m256i p32 = _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
        acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(dk * half(q + size_t(b) * sizeof(BlockQ8_0))), _mm256_cvtepi32_ps(p32),
                                 acc[r]);
      }
    }
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(acc[0], acc[1]), _mm256_hadd_ps(acc[2], acc[3]));
    float sums[4];
    _mm_storeu_ps(sums, _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
    for (int r = 0; r < m; ++r) out[r0 + r] = sums[r];
  }
}

template <KvType T>
void float_dot_n(const uint8_t* k, const uint8_t* qp, size_t q_stride, int n, float* out, int hd) {
  for (int r = 0; r < n; ++r) out[r] = float_dot<T>(k, reinterpret_cast<const float*>(qp + size_t(r) * q_stride), hd);
}

template <KvType T>
void turbo_dot_n(const uint8_t* k, const uint8_t* qp, size_t q_stride, int n, float* out, int hd) {
  for (int r = 0; r < n; ++r) out[r] = kv_type_ops(T).dot(k, qp + size_t(r) * q_stride, hd);
}

float q4_dot(const uint8_t* k, const uint8_t* qp, int hd) {
  __m256 acc = _mm256_setzero_ps();
  for (int b = 0; b < hd / kQK32; ++b) {
    const float d = half(k + size_t(b) * sizeof(BlockQ4_0)) * half(qp + size_t(b) * sizeof(BlockQ8_0));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(int8_dot(q4_values(k, b), q8_values(qp, b))), acc);
  }
  return hsum_ps(acc);
}

// acc[0..32) += s * q for the 32 int8 values q (s = a * block scale).
void axpy_block(__m256 s, __m256i q, float* acc) {
  const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
  const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
  for (int j = 0; j < 4; ++j) {
    const __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(parts[j]));
    _mm256_storeu_ps(acc + 8 * j, _mm256_fmadd_ps(s, v, _mm256_loadu_ps(acc + 8 * j)));
  }
}

void q8_axpy(float a, const uint8_t* v, float* acc, int hd) {
  for (int b = 0; b < hd / kQK32; ++b)
    axpy_block(_mm256_set1_ps(a * half(v + size_t(b) * sizeof(BlockQ8_0))), q8_values(v, b), acc + b * kQK32);
}

void q4_axpy(float a, const uint8_t* v, float* acc, int hd) {
  for (int b = 0; b < hd / kQK32; ++b)
    axpy_block(_mm256_set1_ps(a * half(v + size_t(b) * sizeof(BlockQ4_0))), q4_values(v, b), acc + b * kQK32);
}

void q8_decode(const uint8_t* src, float* x, int hd) {
  std::fill(x, x + hd, 0.0f);
  q8_axpy(1.0f, src, x, hd);
}

void q4_decode(const uint8_t* src, float* x, int hd) {
  std::fill(x, x + hd, 0.0f);
  q4_axpy(1.0f, src, x, hd);
}

// ---- turbo: the primitives of quant/turbo.h through the type's ops ----

template <KvType T>
float turbo_dot(const uint8_t* k, const uint8_t* qp, int hd) { return kv_type_ops(T).dot(k, qp, hd); }
template <KvType T>
void turbo_axpy(float a, const uint8_t* v, float* acc, int hd) { kv_type_ops(T).axpy(a, v, acc, hd); }
constexpr int turbo_bits_of(KvType t) { return t == KvType::Turbo4 ? 4 : t == KvType::Turbo3 ? 3 : 2; }
template <KvType T>
void turbo_decode(const uint8_t* src, float* x, int hd) {  // rotated basis
  turbo::decode_rotated(turbo_bits_of(T), src, x, hd);
}

// ---- turbo<B>t: rows decoded group by group (quant/turbo_trellis.h), then the f32 kernels ----

template <int B>
float trellis_dot(const uint8_t* k, const uint8_t* qp, int hd) {
  const turbo::trellis::detail::Shape s = turbo::trellis::detail::shape(B, hd);  // hd validated with the rows
  const float* q = reinterpret_cast<const float*>(qp);
  alignas(32) float y[128];
  float sum = 0;
  for (int g = 0; g < s.n_groups; ++g) {
    turbo::trellis::decode_rotated_fast(B, k + size_t(g) * s.group_bytes, y, s.group);
    sum += dot_f32(y, q + g * s.group, s.group);
  }
  return sum;
}
template <int B>
void trellis_dot_n(const uint8_t* k, const uint8_t* qp, size_t q_stride, int n_q, float* out, int hd) {
  const turbo::trellis::detail::Shape s = turbo::trellis::detail::shape(B, hd);  // hd validated with the rows
  alignas(32) float y[128];
  std::fill(out, out + n_q, 0.0f);
  for (int g = 0; g < s.n_groups; ++g) {  // each group decoded once for all the queries
    turbo::trellis::decode_rotated_fast(B, k + size_t(g) * s.group_bytes, y, s.group);
    for (int r = 0; r < n_q; ++r)
      out[r] += dot_f32(y, reinterpret_cast<const float*>(qp + size_t(r) * q_stride) + g * s.group, s.group);
  }
}
template <int B>
void trellis_axpy(float a, const uint8_t* v, float* acc, int hd) {
  const turbo::trellis::detail::Shape s = turbo::trellis::detail::shape(B, hd);  // hd validated with the rows
  alignas(32) float y[128];
  for (int g = 0; g < s.n_groups; ++g) {
    turbo::trellis::decode_rotated_fast(B, v + size_t(g) * s.group_bytes, y, s.group);
    axpy_f32(a, y, acc + g * s.group, s.group);
  }
}
template <int B>
void trellis_decode(const uint8_t* src, float* x, int hd) { turbo::trellis::decode_rotated_fast(B, src, x, hd); }

template <KvType T>
constexpr KvRowKernels float_kernels{float_dot_row<T>, float_dot_n<T>, float_axpy<T>, float_decode<T>, true,
                                     dot_f32,          axpy_f32,      dot_f32_n,       axpy_f32_n};
template <KvType T>
constexpr KvRowKernels turbo_kernels{turbo_dot<T>, turbo_dot_n<T>, turbo_axpy<T>, turbo_decode<T>, true,
                                     dot_f32,      axpy_f32,      dot_f32_n,       axpy_f32_n};
template <int B>
constexpr KvRowKernels trellis_kernels{trellis_dot<B>, trellis_dot_n<B>, trellis_axpy<B>, trellis_decode<B>, true,
                                       dot_f32,        axpy_f32,         dot_f32_n,       axpy_f32_n};
constexpr KvRowKernels q8_kernels{q8_dot, quant_dot_n<false>, q8_axpy, q8_decode, false, dot_f32, axpy_f32, dot_f32_n, axpy_f32_n};
constexpr KvRowKernels q4_kernels{q4_dot, quant_dot_n<true>, q4_axpy, q4_decode, false, dot_f32, axpy_f32, dot_f32_n, axpy_f32_n};

}  // namespace

ExpSumFn exp_sum_avx2() { return cpu_features().has_avx2_set() ? exp_sum : nullptr; }

const KvRowKernels* kv_row_kernels_avx2(KvType t) {
  if (!cpu_features().has_avx2_set()) return nullptr;
  switch (t) {
    case KvType::F32: return &float_kernels<KvType::F32>;
    case KvType::F16: return &float_kernels<KvType::F16>;
    case KvType::BF16: return &float_kernels<KvType::BF16>;
    case KvType::Q8_0: return &q8_kernels;
    case KvType::Q4_0: return &q4_kernels;
    case KvType::Turbo4: return &turbo_kernels<KvType::Turbo4>;
    case KvType::Turbo3: return &turbo_kernels<KvType::Turbo3>;
    case KvType::Turbo2: return &turbo_kernels<KvType::Turbo2>;
    case KvType::Turbo4T: return &trellis_kernels<4>;
    case KvType::Turbo3T: return &trellis_kernels<3>;
    case KvType::Turbo2T: return &trellis_kernels<2>;
  }
  return nullptr;
}

}  // namespace polykv
