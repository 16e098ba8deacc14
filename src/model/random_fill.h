// Fills a tensor with random normal values, quantized row by row with quantize_row_ref, on several
// threads. Output depends only on the spec (never on n_threads): rows are grouped into chunks of a
// fixed size that depends only on ne0, and chunk c draws from its own generator seeded by (seed, c).
// Values are bit-identical across runs of the same build; libm differences may change the last bits
// across platforms.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace polykv {

struct RandomFill {
  int64_t ne0 = 0;   // row length; a multiple of type's block size
  int64_t rows = 0;
  DType type = DType::F32;
  uint64_t seed = 0;
  float mean = 0.0f;  // values are mean + stddev * N(0, 1)
  float stddev = 1.0f;
  int n_threads = 0;  // <= 0: hardware concurrency
};

// dst holds exactly row_bytes(type, ne0) * rows bytes.
void fill_random(const RandomFill& spec, uint8_t* dst, size_t n_bytes);

// SplitMix64 finalizer: a well-mixed 64-bit function of x, used to derive independent seeds.
uint64_t mix64(uint64_t x);

}  // namespace polykv
