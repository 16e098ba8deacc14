// ARM64 NEON ternary row kernels (ternary_kernels_neon.h) with SDOT. CMake compiles this file with
// -march=armv8.2-a+dotprod; ternary_kernels_neon.cpp calls it only where cpu_features().asimd_dot.
#include "backend/cpu/ternary_kernels_neon.h"

namespace polykv::cpu {

RowDotFn ternary_row_dot_neondot(DType type) { return neon::ternary_kernel<neon::DotprodOps>(type); }

}  // namespace polykv::cpu
