// ARM64 NEON row kernels for every KV type (kv_row_ops.h), plain ARMv8-A. f32/f16/bf16 rows: 4-lane
// FMA chains (f16 via FCVTL, bf16 as the upper half of an f32); q8_0/q4_0 K rows dotted with the
// q8_0 query in integers (kv_quant_dot_neon.h: SDOT where cpu_features().asimd_dot, else SMULL +
// SADALP; exact per block) and scaled per block; q8_0/q4_0 V rows
// widened to f32 for the axpy. turbo rows use the TurboQuant primitives through the type's ops (as
// the AVX2 table does); turbo<B>t rows are decoded group by group (turbo::trellis::
// decode_rotated_fast: the NEON decoder on ARM64) and then go through the f32 kernels. Tails (hd not
// a multiple of 4) go through scalar code.
#include <arm_neon.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/kv_row_ops.h"
#include "backend/cpu/kv_quant_dot_neon.h"
#include "core/cpu_features.h"
#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/turbo.h"
#include "quant/turbo_trellis.h"
#include "quant/turbo_trellis_internal.h"

namespace polykv {

void kv_q8_dot_n_neondot(const uint8_t* k, const uint8_t* qp, size_t q_stride, int n, float* out, int hd);
void kv_q4_dot_n_neondot(const uint8_t* k, const uint8_t* qp, size_t q_stride, int n, float* out, int hd);

namespace {

// ---- f32 / f16 / bf16 ----

template <KvType T>
float32x4_t load4(const uint8_t* p, int i) {
  if constexpr (T == KvType::F32) {
    return vld1q_f32(reinterpret_cast<const float*>(p) + i);
  } else if constexpr (T == KvType::F16) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(p) + i)));
  } else {  // bf16: the upper half of an f32
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(reinterpret_cast<const uint16_t*>(p) + i), 16));
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
  float32x4_t acc[4] = {vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0)};
  int i = 0;
  for (; i + 16 <= n; i += 16)
    for (int c = 0; c < 4; ++c) acc[c] = vfmaq_f32(acc[c], load4<T>(k, i + 4 * c), vld1q_f32(q + i + 4 * c));
  for (; i + 4 <= n; i += 4) acc[0] = vfmaq_f32(acc[0], load4<T>(k, i), vld1q_f32(q + i));
  float s = vaddvq_f32(vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3])));
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
  int i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(acc + i, vfmaq_n_f32(vld1q_f32(acc + i), load4<T>(v, i), a));
  for (; i < n; ++i) acc[i] += a * load1<T>(v, i);
}

void axpy_f32(float a, const float* x, float* acc, int hd) {
  float_axpy<KvType::F32>(a, reinterpret_cast<const uint8_t*>(x), acc, hd);
}

// out[r] = x·q_r; four queries share each load of x (one accumulator each).
void dot_f32_n(const float* x, const float* q, size_t q_stride, int n, float* out, int hd) {
  if (hd % 4) {
    for (int r = 0; r < n; ++r) out[r] = dot_f32(x, q + size_t(r) * q_stride, hd);
    return;
  }
  int r = 0;
  for (; r + 4 <= n; r += 4) {
    const float* q0 = q + size_t(r) * q_stride;
    float32x4_t a0 = vdupq_n_f32(0), a1 = a0, a2 = a0, a3 = a0;
    for (int i = 0; i < hd; i += 4) {
      const float32x4_t xv = vld1q_f32(x + i);
      a0 = vfmaq_f32(a0, xv, vld1q_f32(q0 + i));
      a1 = vfmaq_f32(a1, xv, vld1q_f32(q0 + q_stride + i));
      a2 = vfmaq_f32(a2, xv, vld1q_f32(q0 + 2 * q_stride + i));
      a3 = vfmaq_f32(a3, xv, vld1q_f32(q0 + 3 * q_stride + i));
    }
    vst1q_f32(out + r, vpaddq_f32(vpaddq_f32(a0, a1), vpaddq_f32(a2, a3)));
  }
  for (; r < n; ++r) out[r] = dot_f32(x, q + size_t(r) * q_stride, hd);
}

// acc_r += a[r] * x, x loaded once per 4 values for all rows.
void axpy_f32_n(const float* a, const float* x, float* acc, size_t acc_stride, int n, int hd) {
  if (hd % 4) {
    for (int r = 0; r < n; ++r) axpy_f32(a[r], x, acc + size_t(r) * acc_stride, hd);
    return;
  }
  for (int i = 0; i < hd; i += 4) {
    const float32x4_t xv = vld1q_f32(x + i);
    for (int r = 0; r < n; ++r) {
      float* ar = acc + size_t(r) * acc_stride + i;
      vst1q_f32(ar, vfmaq_n_f32(vld1q_f32(ar), xv, a[r]));
    }
  }
}

template <KvType T>
void float_decode(const uint8_t* src, float* x, int n) {
  int i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(x + i, load4<T>(src, i));
  for (; i < n; ++i) x[i] = load1<T>(src, i);
}

template <KvType T>
void float_dot_n(const uint8_t* k, const uint8_t* qp, size_t q_stride, int n, float* out, int hd) {
  for (int r = 0; r < n; ++r) out[r] = float_dot<T>(k, reinterpret_cast<const float*>(qp + size_t(r) * q_stride), hd);
}

// ---- q8_0 / q4_0: blocks of 32 (hd is a multiple of 32); the query is q8_0 ----

using cpu::neon::block_scale;
using cpu::neon::block_values;

template <bool kQ4>
void quant_dot_n(const uint8_t* k, const uint8_t* qp, size_t q_stride, int n, float* out, int hd) {
  cpu::neon::quant_dot_n<cpu::neon::WideningOps, kQ4>(k, qp, q_stride, n, out, hd);
}
// The SDOT twins (kv_row_ops_neondot.cpp): q8_0 and q4_0.
template <bool kQ4>
void quant_dot_n_sdot(const uint8_t* k, const uint8_t* qp, size_t q_stride, int n, float* out, int hd) {
  if constexpr (kQ4) kv_q4_dot_n_neondot(k, qp, q_stride, n, out, hd);
  else kv_q8_dot_n_neondot(k, qp, q_stride, n, out, hd);
}
template <bool kQ4, bool kSdot>
float quant_dot(const uint8_t* k, const uint8_t* qp, int hd) {
  float out;
  if constexpr (kSdot) quant_dot_n_sdot<kQ4>(k, qp, 0, 1, &out, hd);
  else quant_dot_n<kQ4>(k, qp, 0, 1, &out, hd);
  return out;
}

// acc[0..32) += s * (the 32 values lo, hi).
void axpy_block(float s, int8x16_t lo, int8x16_t hi, float* acc) {
  const int16x8_t h[4] = {vmovl_s8(vget_low_s8(lo)), vmovl_high_s8(lo), vmovl_s8(vget_low_s8(hi)), vmovl_high_s8(hi)};
  for (int j = 0; j < 4; ++j) {
    const float32x4_t a = vcvtq_f32_s32(vmovl_s16(vget_low_s16(h[j]))), b = vcvtq_f32_s32(vmovl_high_s16(h[j]));
    vst1q_f32(acc + 8 * j, vfmaq_n_f32(vld1q_f32(acc + 8 * j), a, s));
    vst1q_f32(acc + 8 * j + 4, vfmaq_n_f32(vld1q_f32(acc + 8 * j + 4), b, s));
  }
}

template <bool kQ4>
void quant_axpy(float a, const uint8_t* v, float* acc, int hd) {
  for (int b = 0; b < hd / kQK32; ++b) {
    int8x16_t lo, hi;
    block_values<kQ4>(v, b, lo, hi);
    axpy_block(a * block_scale<kQ4>(v, b), lo, hi, acc + b * kQK32);
  }
}

template <bool kQ4>
void quant_decode(const uint8_t* src, float* x, int hd) {
  std::fill(x, x + hd, 0.0f);
  quant_axpy<kQ4>(1.0f, src, x, hd);
}

// ---- turbo: the primitives of quant/turbo.h through the type's ops ----

template <KvType T>
float turbo_dot(const uint8_t* k, const uint8_t* qp, int hd) { return kv_type_ops(T).dot(k, qp, hd); }
template <KvType T>
void turbo_dot_n(const uint8_t* k, const uint8_t* qp, size_t q_stride, int n, float* out, int hd) {
  for (int r = 0; r < n; ++r) out[r] = kv_type_ops(T).dot(k, qp + size_t(r) * q_stride, hd);
}
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
  alignas(16) float y[128];
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
  alignas(16) float y[128];
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
  alignas(16) float y[128];
  for (int g = 0; g < s.n_groups; ++g) {
    turbo::trellis::decode_rotated_fast(B, v + size_t(g) * s.group_bytes, y, s.group);
    axpy_f32(a, y, acc + g * s.group, s.group);
  }
}
template <int B>
void trellis_decode(const uint8_t* src, float* x, int hd) { turbo::trellis::decode_rotated_fast(B, src, x, hd); }

// ---- exp sums of the softmax ----

// exp(x) for x <= 0 (x = s - max): 2^k * p(r), k = round(x / ln 2), r = x - k ln 2 in [-ln2/2, ln2/2],
// p the degree-6 Taylor polynomial (relative error < 2e-7; the AVX2 kernel's constants). x < -87 (and
// -inf) gives 0.
float32x4_t exp_nonpositive(float32x4_t x) {
  const uint32x4_t underflow = vcltq_f32(x, vdupq_n_f32(-87.0f));
  x = vmaxq_f32(x, vdupq_n_f32(-87.0f));
  const float32x4_t k = vrndnq_f32(vmulq_n_f32(x, 1.44269504f));
  float32x4_t r = vfmsq_n_f32(x, k, 0.693145752f);  // ln 2 split in two for accuracy
  r = vfmsq_n_f32(r, k, 1.42860677e-6f);
  float32x4_t p = vdupq_n_f32(1.0f / 720);
  for (float c : {1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f}) p = vfmaq_f32(vdupq_n_f32(c), p, r);
  const int32x4_t e = vshlq_n_s32(vcvtq_s32_f32(k), 23);  // 2^k via the exponent field (k is integral)
  const float32x4_t y = vreinterpretq_f32_s32(vaddq_s32(vreinterpretq_s32_f32(p), e));
  return vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(y), underflow));
}

float exp_sum(float* s, int n, float m) {
  const float32x4_t vm = vdupq_n_f32(m);
  float32x4_t acc = vdupq_n_f32(0);
  int i = 0;
  for (; i + 4 <= n; i += 4) {
    const float32x4_t y = exp_nonpositive(vsubq_f32(vld1q_f32(s + i), vm));
    vst1q_f32(s + i, y);
    acc = vaddq_f32(acc, y);
  }
  float sum = vaddvq_f32(acc);
  for (; i < n; ++i) sum += (s[i] = std::exp(s[i] - m));
  return sum;
}

template <KvType T>
constexpr KvRowKernels float_kernels{float_dot_row<T>, float_dot_n<T>, float_axpy<T>, float_decode<T>, true,
                                     dot_f32,          axpy_f32,      dot_f32_n,       axpy_f32_n};
template <KvType T>
constexpr KvRowKernels turbo_kernels{turbo_dot<T>, turbo_dot_n<T>, turbo_axpy<T>, turbo_decode<T>, true,
                                     dot_f32,      axpy_f32,      dot_f32_n,       axpy_f32_n};
template <int B>
constexpr KvRowKernels trellis_kernels{trellis_dot<B>, trellis_dot_n<B>, trellis_axpy<B>, trellis_decode<B>, true,
                                       dot_f32,        axpy_f32,         dot_f32_n,       axpy_f32_n};
template <bool kQ4>
constexpr KvRowKernels quant_kernels{quant_dot<kQ4, false>, quant_dot_n<kQ4>, quant_axpy<kQ4>, quant_decode<kQ4>,
                                     false, dot_f32, axpy_f32, dot_f32_n, axpy_f32_n};
template <bool kQ4>
constexpr KvRowKernels quant_kernels_sdot{quant_dot<kQ4, true>, quant_dot_n_sdot<kQ4>, quant_axpy<kQ4>,
                                          quant_decode<kQ4>, false, dot_f32, axpy_f32, dot_f32_n, axpy_f32_n};

}  // namespace

ExpSumFn exp_sum_neon() { return exp_sum; }

const KvRowKernels* kv_row_kernels_neon(KvType t) {
  switch (t) {
    case KvType::F32: return &float_kernels<KvType::F32>;
    case KvType::F16: return &float_kernels<KvType::F16>;
    case KvType::BF16: return &float_kernels<KvType::BF16>;
    case KvType::Q8_0: return cpu_features().asimd_dot ? &quant_kernels_sdot<false> : &quant_kernels<false>;
    case KvType::Q4_0: return cpu_features().asimd_dot ? &quant_kernels_sdot<true> : &quant_kernels<true>;
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
