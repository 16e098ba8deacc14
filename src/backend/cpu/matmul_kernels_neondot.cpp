// ARM64 NEON q4_0 / q8_0 row kernels with SDOT (FEAT_DotProd). CMake compiles this file with
// -march=armv8.2-a+dotprod (DotProd is an ARMv8.2 extension, so a CPU with it has v8.2);
// matmul_kernels_neon.cpp calls it only where cpu_features().asimd_dot.
#include <arm_neon.h>

#include "backend/cpu/legacy_kernels_neon.h"

namespace polykv::cpu {
namespace {

struct DotprodOps {
  static int32x4_t dot(int32x4_t acc, int8x16_t w, int8x16_t a) { return vdotq_s32(acc, w, a); }
};

}  // namespace

RowDotFn row_dot_neondot(DType type) { return neon::legacy_kernel<DotprodOps>(type); }

}  // namespace polykv::cpu
