// ARM64 NEON k-quant row kernels (kquant_kernels_neon.h) with SDOT. CMake compiles this file with
// -march=armv8.2-a+dotprod; matmul_kernels_neon.cpp calls it only where cpu_features().asimd_dot.
#include "backend/cpu/kquant_kernels_neon.h"

namespace polykv::cpu {

RowDotFn kquant_row_dot_neondot(DType type) { return neon::kquant_kernel<neon::DotprodOps>(type); }

}  // namespace polykv::cpu
