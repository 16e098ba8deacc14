// The turbo codecs' x86 kernel getters on a CPU that is not x86 (ARM64): CMake compiles this file
// instead of turbo_*_avx2.cpp / turbo_*_avx512.cpp there. No x86 kernel exists, so every table
// falls back to the reference (or NEON) code.
#include "quant/turbo_internal.h"
#include "quant/turbo_trellis.h"

namespace polykv::turbo {

namespace detail {
const Kernels* kernels_avx2() { return nullptr; }
}  // namespace detail

namespace trellis {
DecodeFn decode_rotated_avx2_kernel() { return nullptr; }
DecodeFn decode_rotated_avx512_kernel() { return nullptr; }
QuantizeFn quantize_head_avx2_kernel() { return nullptr; }
void decode_rotated_fast(int bits, const uint8_t* src, float* y, int head_dim) {
#if defined(__aarch64__)
  decode_rotated_neon_kernel()(bits, src, y, head_dim);
#else
  decode_rotated(bits, src, y, head_dim);
#endif
}
}  // namespace trellis

}  // namespace polykv::turbo
