// The integer-dot policies of the ARM64 NEON kernels (legacy_kernels_neon.h, kquant_kernels_neon.h):
//   static int32x4_t dot(int32x4_t acc, int8x16_t w, int8x16_t a)  // acc += 4-lane partial sums
// of the 16 products w[i] * a[i] (any split over the lanes; callers use only lane totals).
// WideningOps is plain ARMv8-A (SMULL + SADALP: every |w * a| <= 128 * 128 fits int16 before the
// pairwise widening add); DotprodOps is SDOT and exists only in files compiled with +dotprod
// (*_neondot.cpp), chosen at run time where cpu_features().asimd_dot.
// Internal linkage on purpose (as kernel_kquant_scales.h): the same inline code compiled with and
// without +dotprod must not be merged by the linker into one copy.
#pragma once
#include <arm_neon.h>

namespace polykv::cpu::neon {
namespace {

struct WideningOps {
  static int32x4_t dot(int32x4_t acc, int8x16_t w, int8x16_t a) {
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(w), vget_low_s8(a)));
    return vpadalq_s16(acc, vmull_high_s8(w, a));
  }
};

#if defined(__ARM_FEATURE_DOTPROD)
struct DotprodOps {
  static int32x4_t dot(int32x4_t acc, int8x16_t w, int8x16_t a) { return vdotq_s32(acc, w, a); }
};
#endif

}  // namespace
}  // namespace polykv::cpu::neon
