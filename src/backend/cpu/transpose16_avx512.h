// A 16 x 16 transpose of 32-bit elements in zmm registers, for AVX-512 kernels (include only from
// files compiled for AVX-512: *_avx512.cpp).
#pragma once
#include <immintrin.h>

namespace polykv {

// In place: r[e] <- column e of the 16 x 16 block r (r[i][e] -> r[e][i]).
[[gnu::always_inline]] inline void transpose16(__m512* r) {
  __m512 t[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {  // r[4i + c], 128-bit lane L: rows 4i..4i+3, element 4L + c
    r[4 * i + 0] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  __m512 out[16];
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    const __m512 a = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x88), b = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xDD);
    const __m512 x = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x88), y = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xDD);
    out[c] = _mm512_shuffle_f32x4(a, x, 0x88);
    out[c + 8] = _mm512_shuffle_f32x4(a, x, 0xDD);
    out[c + 4] = _mm512_shuffle_f32x4(b, y, 0x88);
    out[c + 12] = _mm512_shuffle_f32x4(b, y, 0xDD);
  }
#pragma GCC unroll 16
  for (int e = 0; e < 16; ++e) r[e] = out[e];
}

// The same on integer vectors (the lanes are moved, never interpreted).
[[gnu::always_inline]] inline void transpose16(__m512i* r) {
  __m512 f[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) f[i] = _mm512_castsi512_ps(r[i]);
  transpose16(f);
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) r[i] = _mm512_castps_si512(f[i]);
}

}  // namespace polykv
