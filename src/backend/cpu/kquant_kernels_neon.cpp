// ARM64 NEON k-quant row kernels (kquant_kernels_neon.h), plain ARMv8-A: widening multiplies.
// matmul_kernels_neon.cpp's row_dot_neon() chooses these or the SDOT ones.
#include "backend/cpu/kquant_kernels_neon.h"

namespace polykv::cpu {

RowDotFn kquant_row_dot_neon_plain(DType type) { return neon::kquant_kernel<neon::WideningOps>(type); }

}  // namespace polykv::cpu
