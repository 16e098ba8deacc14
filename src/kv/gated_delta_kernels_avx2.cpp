// AVX2 form of the Gated DeltaNet token step (gated_delta_kernels.h): token_step_ref's bits, 8 columns a vector.
// This file is compiled with -mfma (CMakeLists.txt): contraction is off here so that every multiply-add
// stays the reference's two roundings.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#elif defined(__clang__)
#pragma clang fp contract(off)
#endif
#include <immintrin.h>

#include <cstddef>

#include "kv/gated_delta_kernels.h"
#include "kv/gated_delta_simd.h"

namespace polykv::gdn {
namespace {

struct V {
  using T = __m256;
  static constexpr int kWidth = 8;
  static T zero() { return _mm256_setzero_ps(); }
  static T set1(float x) { return _mm256_set1_ps(x); }
  static T load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, T x) { _mm256_storeu_ps(p, x); }
  static T mul(T a, T b) { return _mm256_mul_ps(a, b); }
  static T add(T a, T b) { return _mm256_add_ps(a, b); }
};

void kernel(const float* S0, float* S, const float* k, const float* v, const float* q, float decay, float beta, int d,
            float* tmp, float* o) {
  simd::token_step<V>(S0, S, k, v, q, decay, beta, d, tmp, o);
}

}  // namespace

TokenStepFn token_step_avx2_kernel() { return &kernel; }

}  // namespace polykv::gdn
