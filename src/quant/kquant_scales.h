// Unpacking of the packed 6-bit sub-block scales of the k-quants. Shared by the scalar reference
// (quant/dequantize_ref.cpp) and the SIMD kernels, so every path reads the bits the same way.
#pragma once
#include <cstdint>

#include "quant/blocks.h"

namespace polykv {

// A q4_K / q5_K super-block has 8 sub-blocks of 32 values; sub-block j has a 6-bit scale and a
// 6-bit min, packed into the 12 bytes `scales` (b[0..11]) as:
//   j < 4:  scale = b[j]   & 63,                         min = b[j+4] & 63
//   j >= 4: scale = (b[j+4] & 15) | (b[j-4] >> 6) << 4,   min = (b[j+4] >> 4) | (b[j] >> 6) << 4
// Values: x = d * scale * q - dmin * min.  Requires 0 <= j < 8.
struct ScaleMin {
  uint8_t scale;  // 0..63
  uint8_t min;    // 0..63
};

inline ScaleMin kquant_scale_min(int j, const uint8_t* scales) {
  if (j < 4) return {uint8_t(scales[j] & 63), uint8_t(scales[j + 4] & 63)};
  const uint8_t scale = uint8_t((scales[j + 4] & 0x0F) | ((scales[j - 4] >> 6) << 4));
  const uint8_t min = uint8_t((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
  return {scale, min};
}

// A q3_K super-block has 16 sub-blocks of 16 values, each with a 6-bit scale stored with a bias of 32.
// In the 12 bytes b[0..11]: the low 4 bits of scale j are the low nibble of b[j] (j < 8) or the high
// nibble of b[j-8] (j >= 8); the high 2 bits are bits 2*(j/4)..2*(j/4)+1 of b[8 + j%4].
// Returns the signed scale (raw - 32), in -32..31.  Requires 0 <= j < 16.
inline int q3k_scale(int j, const uint8_t* scales) {
  const int low = j < 8 ? (scales[j] & 0x0F) : (scales[j - 8] >> 4);
  const int high = (scales[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (low | (high << 4)) - 32;
}

// All 16 signed q3_K scales at once (out[j] = q3k_scale(j, scales)).
inline void q3k_scales(const uint8_t* scales, int8_t out[16]) {
  for (int j = 0; j < 16; ++j) out[j] = int8_t(q3k_scale(j, scales));
}

}  // namespace polykv
