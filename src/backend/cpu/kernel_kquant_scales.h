// Unpacking of the packed 6-bit scales of q3_K / q4_K / q5_K (ggml layouts, see quant/blocks.h; an
// independent twin of quant/kquant_scales.h, so the kernels and the reference cross-check each other),
// shared by the kernel files of every ISA. Internal linkage on purpose: this header is compiled into
// both baseline and AVX TUs, and an inline function with external linkage could be merged by the
// linker into one copy built with the wrong ISA.
#pragma once
#include <cstdint>
#include <cstring>

namespace polykv::cpu {
namespace {

// q4_K / q5_K: 8 sub-blocks of 32 values, each with a 6-bit scale sc[j] and 6-bit min m[j]
// (value = d * sc[j] * q - dmin * m[j]). Bytes 0..3: sc[0..3] low 6 bits (top 2 bits: sc[4..7] high
// bits); bytes 4..7: m[0..3] likewise; bytes 8..11: low nibble sc[4..7], high nibble m[4..7].
inline void unpack_scales_mins_k4(const uint8_t* s, uint8_t* sc, uint8_t* m) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = s[j] & 63;
    m[j] = s[j + 4] & 63;
  }
  for (int j = 4; j < 8; ++j) {
    sc[j] = uint8_t((s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4));
    m[j] = uint8_t((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

// q3_K: 16 sub-blocks of 16 values with 6-bit scales stored biased by 32; returns them unbiased
// (-32..31). Bytes 0..7: low 4 bits (sub-blocks 0..7 in low nibbles, 8..15 in high nibbles);
// bytes 8..11: high 2 bits, byte 8+i holding sub-blocks i, i+4, i+8, i+12 at bits 0,2,4,6.
inline void unpack_scales_q3_K(const uint8_t* s, int8_t* out) {
  for (int j = 0; j < 16; ++j) {
    const int low = j < 8 ? (s[j] & 0x0F) : (s[j - 8] >> 4);
    const int high = (s[8 + (j % 4)] >> (2 * (j / 4))) & 3;
    out[j] = int8_t((low | (high << 4)) - 32);
  }
}

}  // namespace
}  // namespace polykv::cpu
