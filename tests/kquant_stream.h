/* A long deterministic stream of awkward 256-value blocks for the k-quant quantizers, and the hash
 * of quantized bytes, shared by tests/kquant_quantize_test.cpp and the ggml oracle
 * tools/ggml_quant_oracle/stream_hash.c (so this header is C as well as C++).
 * Every platform makes the same floats: only integer arithmetic, int-to-float conversions of values
 * below 2^24 (exact) and float multiplications, never an add after a multiply (nothing a compiler
 * could fuse into an FMA), no library math. */
#ifndef POLYKV_TESTS_KQUANT_STREAM_H
#define POLYKV_TESTS_KQUANT_STREAM_H
#include <stdint.h>

static inline uint64_t kq_stream_next(uint64_t* s) { /* splitmix64 */
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* About N(0, 37837^2) in integers: the sum of four uniform 16-bit values, centred (|v| < 2^17). */
static inline int32_t kq_stream_bell(uint64_t* s) {
  const uint64_t r = kq_stream_next(s);
  return (int32_t)(r & 0xFFFF) + (int32_t)((r >> 16) & 0xFFFF) + (int32_t)((r >> 32) & 0xFFFF) +
         (int32_t)(r >> 48) - 2 * 65536;
}

/* Block b of the stream into x[0..256). Kinds by b % 10: 0-2 bell-shaped; 3 with 1/32 outliers of
 * x16; 4 all >= 0; 5 all <= 0; 6 offset mean; 7 on a coarse grid (rounding ties); 8 groups of zeros
 * and constant sub-blocks among bell values; 9 cubed (heavy tails). Scale per block: a 10-bit
 * mantissa times 2^-20 .. 2^3, so some blocks have fp16-subnormal scales. */
static inline void kq_stream_block(uint64_t seed, uint64_t b, float* x) {
  uint64_t s = seed ^ (b * 0xD1B54A32D192ED03ull);
  const int kind = (int)(b % 10);
  float scale = (float)(1024 + (int)(kq_stream_next(&s) & 1023)) * (1.0f / 1024.0f) * (1.0f / 37837.0f);
  const int e = (int)(kq_stream_next(&s) % 24) - 20;
  for (int k = 0; k < e; ++k) scale *= 2.0f;
  for (int k = 0; k > e; --k) scale *= 0.5f;
  const int32_t offset = (int32_t)(kq_stream_next(&s) % 80001) - 40000;
  const int32_t constant = (int32_t)(kq_stream_next(&s) % 200001) - 100000;
  for (int i = 0; i < 256; ++i) {
    int32_t v = kq_stream_bell(&s);
    if (kind == 3 && (kq_stream_next(&s) & 31) == 0) v *= 16;
    if (kind == 4 && v < 0) v = -v;
    if (kind == 5 && v > 0) v = -v;
    if (kind == 6) v += offset;
    if (kind == 7) v = (v / 16384) * 16384;
    if (kind == 8 && (i / 16) % 3 == 0) v = 0;
    if (kind == 8 && (i / 32) % 4 == 1) v = constant;
    float f = (float)v * scale;
    if (kind == 9) f = f * f * f * (1.0f / (scale * scale * 37837.0f * 37837.0f));
    x[i] = f;
  }
}

/* FNV-1a, 64 bits. */
static inline uint64_t kq_stream_hash(const uint8_t* p, uint64_t n, uint64_t h) {
  for (uint64_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001B3ull;
  return h;
}
static const uint64_t kKqStreamHashStart = 0xCBF29CE484222325ull;

#endif
