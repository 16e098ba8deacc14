// Scalar reference of MXFP4 (quant/mxfp4.h): the definition the SIMD kernels are tested against.
#include "quant/mxfp4.h"

#include <cmath>
#include <cstring>

namespace polykv {

float mxfp4_scale(uint8_t e) {
  // Built from the bits: 2^(e - 128) is the subnormal 2^21 * 2^-149 << e for e < 2, else the normal
  // float with biased exponent e - 1 and a zero mantissa.
  const uint32_t bits = e < 2 ? uint32_t(0x00200000u) << e : uint32_t(e - 1) << 23;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

void dequantize_mxfp4_row(const void* src, float* dst, int64_t n) {
  const BlockMXFP4* b = static_cast<const BlockMXFP4*>(src);
  for (int64_t i = 0; i < n / kQK_MXFP4; ++i, dst += kQK_MXFP4) {
    const float d = mxfp4_scale(b[i].e);
    for (int j = 0; j < 16; ++j) {
      dst[j] = float(kMxfp4Values[b[i].qs[j] & 0x0F]) * d;
      dst[j + 16] = float(kMxfp4Values[b[i].qs[j] >> 4]) * d;
    }
  }
}

namespace {

uint8_t nearest_code(float x, float d) {
  int best = 0;
  float best_err = std::fabs(float(kMxfp4Values[0]) * d - x);
  for (int c = 1; c < 16; ++c) {
    const float err = std::fabs(float(kMxfp4Values[c]) * d - x);
    if (err < best_err) best = c, best_err = err;
  }
  return uint8_t(best);
}

}  // namespace

void quantize_mxfp4_row(const float* src, void* dst, int64_t n) {
  BlockMXFP4* b = static_cast<BlockMXFP4*>(dst);
  for (int64_t i = 0; i < n / kQK_MXFP4; ++i, src += kQK_MXFP4) {
    float amax = 0.0f;
    for (int j = 0; j < kQK_MXFP4; ++j) amax = std::fmax(amax, std::fabs(src[j]));
    int e = 0;
    if (amax > 0.0f) {
      e = int(std::floor(std::log2(amax))) - 2 + 127;
      e = e < 0 ? 0 : e > 255 ? 255 : e;
    }
    b[i].e = uint8_t(e);
    const float d = mxfp4_scale(b[i].e);
    for (int j = 0; j < 16; ++j)
      b[i].qs[j] = uint8_t(nearest_code(src[j], d) | (nearest_code(src[j + 16], d) << 4));
  }
}

}  // namespace polykv
