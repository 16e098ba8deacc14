// Quantization of f32 activations to the int8 formats the integer dot kernels read (see
// matmul_kernels.h). Round to nearest with d = amax / 127, so |x - d*q| <= d/2 for every value: the
// error bound the matmul tests rely on. Kept scalar and shared by all ISAs so that every kernel set
// multiplies the very same integers.
#include <algorithm>
#include <cmath>

#include "backend/cpu/matmul_kernels.h"

namespace polykv::cpu {
namespace {

// Quantizes n (<= 256) values of one block; returns d (0 for an all-zero block).
float quantize_block(const float* x, int n, int8_t* q) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));  // inline, unlike fmax
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int i = 0; i < n; ++i) {
    // amax * id may round to 127.00001; clamp to keep |q| <= 127 (the kernels' sign tricks need it).
    const float v = std::min(127.0f, std::max(-127.0f, std::nearbyint(x[i] * id)));
    q[i] = int8_t(v);
  }
  return d;
}

}  // namespace

void quantize_act_q8_32(const float* x, int64_t n, int8_t* qs, float* d, int32_t* sum) {
  for (int64_t b = 0; b < n / 32; ++b) {
    int8_t* q = qs + b * 32;
    d[b] = quantize_block(x + b * 32, 32, q);
    int32_t s = 0;
    for (int i = 0; i < 32; ++i) s += q[i];
    sum[b] = s;
  }
}

void quantize_act_q8_K(const float* x, int64_t n, int8_t* qs, float* d, int16_t* bsums) {
  for (int64_t b = 0; b < n / 256; ++b) {
    int8_t* q = qs + b * 256;
    d[b] = quantize_block(x + b * 256, 256, q);
    for (int j = 0; j < 16; ++j) {
      int s = 0;
      for (int i = 0; i < 16; ++i) s += q[j * 16 + i];
      bsums[b * 16 + j] = int16_t(s);  // |s| <= 16 * 127
    }
  }
}

}  // namespace polykv::cpu
