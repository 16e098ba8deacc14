// ARM64 NEON q4_0 / q8_0 row kernels with SDOT (FEAT_DotProd); the k-quants' are in
// kquant_kernels_neondot.cpp. CMake compiles this file with
// -march=armv8.2-a+dotprod (DotProd is an ARMv8.2 extension, so a CPU with it has v8.2);
// matmul_kernels_neon.cpp calls it only where cpu_features().asimd_dot.
#include <arm_neon.h>

#include "backend/cpu/legacy_kernels_neon.h"

#include "backend/cpu/neon_int_dot.h"

namespace polykv::cpu {

RowDotFn row_dot_neondot(DType type) { return neon::legacy_kernel<neon::DotprodOps>(type); }

}  // namespace polykv::cpu
