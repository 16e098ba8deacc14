// ARM64 NEON ternary row kernels (ternary_kernels_neon.h), plain ARMv8-A (widening multiplies); where the
// CPU has SDOT (cpu_features().asimd_dot) the ones of ternary_kernels_neondot.cpp instead. This is the one
// place that chooses between the two.
#include "backend/cpu/ternary_kernels_neon.h"

#include "core/cpu_features.h"

namespace polykv::cpu {

RowDotFn ternary_row_dot_neondot(DType type);  // ternary_kernels_neondot.cpp

RowDotFn ternary_row_dot_neon_plain(DType type) { return neon::ternary_kernel<neon::WideningOps>(type); }

RowDotFn ternary_row_dot_neon(DType type) {
  if (cpu_features().asimd_dot)
    if (RowDotFn f = ternary_row_dot_neondot(type)) return f;
  return ternary_row_dot_neon_plain(type);
}

}  // namespace polykv::cpu
