// The q8_0 / q4_0 K-row dots of the ARM64 NEON KV kernels with SDOT (kv_quant_dot_neon.h). CMake
// compiles this file with -march=armv8.2-a+dotprod; kv_row_ops_neon.cpp uses it only where
// cpu_features().asimd_dot.
#include "backend/cpu/kv_quant_dot_neon.h"

namespace polykv {

void kv_q8_dot_n_neondot(const uint8_t* k, const uint8_t* qp, size_t q_stride, int n, float* out, int hd) {
  cpu::neon::quant_dot_n<cpu::neon::DotprodOps, false>(k, qp, q_stride, n, out, hd);
}
void kv_q4_dot_n_neondot(const uint8_t* k, const uint8_t* qp, size_t q_stride, int n, float* out, int hd) {
  cpu::neon::quant_dot_n<cpu::neon::DotprodOps, true>(k, qp, q_stride, n, out, hd);
}

}  // namespace polykv
