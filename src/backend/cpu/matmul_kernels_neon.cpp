// ARM64 NEON matmul kernels (plain ARMv8-A): float rows (f32, f16, bf16) and the table of the integer row
// kernels: q4_0 / q8_0 (legacy_kernels_neon.h) and the k-quants (kquant_kernels_neon.h), with
// widening multiplies. Where the CPU has SDOT (cpu_features().asimd_dot) the integer kernels come
// from the *_neondot.cpp files instead; this is the one place that chooses between the two.
#include <arm_neon.h>

#include "backend/cpu/legacy_kernels_neon.h"
#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/neon_int_dot.h"
#include "core/cpu_features.h"
#include "core/fp16.h"

namespace polykv::cpu {

RowDotFn row_dot_neondot(DType type);            // matmul_kernels_neondot.cpp (q4_0, q8_0)
RowDotFn kquant_row_dot_neondot(DType type);     // kquant_kernels_neondot.cpp (q2_K .. q6_K)
RowDotFn kquant_row_dot_neon_plain(DType type);  // kquant_kernels_neon.cpp

namespace {

// f32 / f16 weights against f32 activations: 4 chains of 4 lanes, then the tail in scalar.
template <typename Load>
float dot_float(const void* w_row, const ActRow& a, int64_t n) {
  const typename Load::T* w = static_cast<const typename Load::T*>(w_row);
  float32x4_t acc[4] = {vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0)};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int k = 0; k < 4; ++k) acc[k] = vfmaq_f32(acc[k], Load::load(w + i + 4 * k), vld1q_f32(a.f32 + i + 4 * k));
  for (; i + 4 <= n; i += 4) acc[0] = vfmaq_f32(acc[0], Load::load(w + i), vld1q_f32(a.f32 + i));
  float s = vaddvq_f32(vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3])));
  for (; i < n; ++i) s += Load::scalar(w[i]) * a.f32[i];
  return s;
}

struct F32Load {
  using T = float;
  static float32x4_t load(const float* p) { return vld1q_f32(p); }
  static float scalar(float x) { return x; }
};
struct F16Load {
  using T = uint16_t;
  static float32x4_t load(const uint16_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
  static float scalar(uint16_t x) { return fp16_to_f32(x); }
};
struct BF16Load {  // bf16 is the upper half of an f32
  using T = uint16_t;
  static float32x4_t load(const uint16_t* p) { return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16)); }
  static float scalar(uint16_t x) { return bf16_to_f32(x); }
};

}  // namespace

RowDotFn row_dot_neon(DType type) {
  switch (type) {
    case DType::F32: return each_token<dot_float<F32Load>>;
    case DType::F16: return each_token<dot_float<F16Load>>;
    case DType::BF16: return each_token<dot_float<BF16Load>>;
    default: break;
  }
  if (cpu_features().asimd_dot) {
    if (RowDotFn f = row_dot_neondot(type)) return f;
    if (RowDotFn f = kquant_row_dot_neondot(type)) return f;
  }
  return row_dot_neon_plain(type);
}

// The plain ARMv8-A integer kernels whatever the CPU has (tests compare both variants).
RowDotFn row_dot_neon_plain(DType type) {
  if (RowDotFn f = neon::legacy_kernel<neon::WideningOps>(type)) return f;
  return kquant_row_dot_neon_plain(type);
}

}  // namespace polykv::cpu
