// Greedy argmax over a row of logits, the sampler's temperature-0 choice (engine/sampler.h).
//
// Contract (every ISA, bit-for-bit the same answer as argmax_first_scalar):
//   - the index of the first maximum in id order (ties: the lowest id);
//   - NaN never wins; -inf never wins (a row of only NaN / -inf gives -1); +inf wins like any maximum;
//   - n <= 0 gives -1.
// argmax_first dispatches once per call on core/isa.h's active_isa() (avx512 > avx2 > scalar).
// The SIMD kernels take the maximum of a chunk with max instructions (which drop NaN: the running
// maximum is never NaN, and max(NaN, m) keeps m), then look for the first equal element inside that
// chunk only when the chunk's maximum beats the best so far: one pass over memory, the second look
// stays in L1.
#pragma once
#include <cstdint>

namespace polykv {

using ArgmaxFn = int32_t (*)(const float* x, int32_t n);

int32_t argmax_first_scalar(const float* x, int32_t n);  // the reference
int32_t argmax_first(const float* x, int32_t n);         // the widest kernel of active_isa()

// ISA kernels (nullptr where this build or CPU has none: argmax_avx2.cpp, argmax_avx512.cpp).
ArgmaxFn argmax_avx2();
ArgmaxFn argmax_avx512();

}  // namespace polykv
