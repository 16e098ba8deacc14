// The ARM64 counterpart of core/simd_f32_x86.h: F32x4 (NEON float32x4_t) for kernels written once over a
// vector type (kv/gated_delta_simd.h, backend/cpu/gated_delta_chunked.h). Plain IEEE multiplies and adds
// (vmulq_f32, vaddq_f32), no fused form; a TU that promises a scalar reference's bits also turns contraction
// off (GCC would otherwise fuse the two intrinsics into an fmla). Include only from *_neon.cpp. Internal linkage.
#pragma once
#include <arm_neon.h>

namespace polykv::simd_neon {
namespace {

struct F32x4 {
  using T = float32x4_t;
  static constexpr int kWidth = 4;
  static T zero() { return vdupq_n_f32(0.0f); }
  static T set1(float x) { return vdupq_n_f32(x); }
  static T load(const float* p) { return vld1q_f32(p); }
  static void store(float* p, T x) { vst1q_f32(p, x); }
  static T mul(T a, T b) { return vmulq_f32(a, b); }
  static T add(T a, T b) { return vaddq_f32(a, b); }
};

}  // namespace
}  // namespace polykv::simd_neon
