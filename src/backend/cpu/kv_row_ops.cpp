#include "backend/cpu/kv_row_ops.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/isa.h"

namespace polykv {
namespace {

float dot_f32_scalar(const float* x, const float* q, int hd) {
  float s = 0;
  for (int i = 0; i < hd; ++i) s += x[i] * q[i];
  return s;
}

void axpy_f32_scalar(float a, const float* x, float* acc, int hd) {
  for (int i = 0; i < hd; ++i) acc[i] += a * x[i];
}

void dot_f32_n_scalar(const float* x, const float* q, size_t q_stride, int n, float* out, int hd) {
  for (int r = 0; r < n; ++r) out[r] = dot_f32_scalar(x, q + size_t(r) * q_stride, hd);
}

void axpy_f32_n_scalar(const float* a, const float* x, float* acc, size_t acc_stride, int n, int hd) {
  for (int r = 0; r < n; ++r) axpy_f32_scalar(a[r], x, acc + size_t(r) * acc_stride, hd);
}

template <KvType T>
float dot_scalar(const uint8_t* k, const uint8_t* qp, int hd) { return kv_type_ops(T).dot(k, qp, hd); }

template <KvType T>
void dot_n_scalar(const uint8_t* k, const uint8_t* qp, size_t q_stride, int n, float* out, int hd) {
  for (int r = 0; r < n; ++r) out[r] = kv_type_ops(T).dot(k, qp + size_t(r) * q_stride, hd);
}

template <KvType T>
void axpy_scalar(float a, const uint8_t* v, float* acc, int hd) { kv_type_ops(T).axpy(a, v, acc, hd); }

// Decoding in the type's basis is an axpy with a = 1 into zeros (turbo's reference decoder returns
// the original basis, so it cannot be used here).
template <KvType T>
void decode_scalar(const uint8_t* src, float* x, int hd) {
  std::fill(x, x + hd, 0.0f);
  kv_type_ops(T).axpy(1.0f, src, x, hd);
}

template <KvType T>
constexpr KvRowKernels scalar_kernels{dot_scalar<T>,  dot_n_scalar<T>, axpy_scalar<T>,   decode_scalar<T>, false,
                                      dot_f32_scalar, axpy_f32_scalar, dot_f32_n_scalar, axpy_f32_n_scalar};

}  // namespace

const KvRowKernels& kv_row_kernels_scalar(KvType t) {
  switch (t) {
    case KvType::F32: return scalar_kernels<KvType::F32>;
    case KvType::F16: return scalar_kernels<KvType::F16>;
    case KvType::BF16: return scalar_kernels<KvType::BF16>;
    case KvType::Q8_0: return scalar_kernels<KvType::Q8_0>;
    case KvType::Q4_0: return scalar_kernels<KvType::Q4_0>;
    case KvType::Turbo4: return scalar_kernels<KvType::Turbo4>;
    case KvType::Turbo3: return scalar_kernels<KvType::Turbo3>;
    case KvType::Turbo2: return scalar_kernels<KvType::Turbo2>;
    case KvType::Turbo4T: return scalar_kernels<KvType::Turbo4T>;
    case KvType::Turbo3T: return scalar_kernels<KvType::Turbo3T>;
    case KvType::Turbo2T: return scalar_kernels<KvType::Turbo2T>;
  }
  fail("unknown KV type");
}

const KvRowKernels& kv_row_kernels_for(Isa isa, KvType t) {
  if (isa_has_avx512(isa))
    if (const KvRowKernels* k = kv_row_kernels_avx512(t)) return *k;
  if (isa_has_avx2(isa))
    if (const KvRowKernels* k = kv_row_kernels_avx2(t)) return *k;
#if defined(__aarch64__)
  if (isa == Isa::Neon)
    if (const KvRowKernels* k = kv_row_kernels_neon(t)) return *k;
#endif
  return kv_row_kernels_scalar(t);
}

const KvRowKernels& kv_row_kernels(KvType t) { return kv_row_kernels_for(active_isa(), t); }

float exp_sum_scalar(float* s, int n, float m) {
  float sum = 0;
  for (int i = 0; i < n; ++i) sum += (s[i] = std::exp(s[i] - m));
  return sum;
}

ExpSumFn exp_sum_kernel() {
#if defined(__aarch64__)
  if (active_isa() == Isa::Neon) return exp_sum_neon();
#endif
  const ExpSumFn avx2 = isa_has_avx2(active_isa()) ? exp_sum_avx2() : nullptr;
  return avx2 ? avx2 : exp_sum_scalar;
}

const char* kv_row_isa() {
  const Isa isa = active_isa();
  if (isa_has_avx512(isa) && kv_row_kernels_avx512(KvType::F16)) return "avx512";
  if (isa_has_avx2(isa) && kv_row_kernels_avx2(KvType::F16)) return "avx2";
#if defined(__aarch64__)
  if (isa == Isa::Neon && kv_row_kernels_neon(KvType::F16)) return "neon";
#endif
  return "scalar";
}

}  // namespace polykv
