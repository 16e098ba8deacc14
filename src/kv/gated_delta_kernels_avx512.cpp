// AVX512 form of the Gated DeltaNet token step (gated_delta_kernels.h): token_step_ref's bits, 16 columns a vector.
// This file is compiled with -mfma (CMakeLists.txt): contraction is off here so that every multiply-add
// stays the reference's two roundings.
#include "core/fp_contract_off.h"  // first: contraction off for this TU
#include <cstddef>

#include "core/simd_f32_x86.h"
#include "kv/gated_delta_kernels.h"
#include "kv/gated_delta_simd.h"

namespace polykv::gdn {
namespace {

using V = simd_x86::F32x16;

void kernel(const float* S0, float* S, const float* k, const float* v, const float* q, float decay, float beta, int d,
            float* tmp, float* o) {
  simd::token_step<V>(S0, S, k, v, q, decay, beta, d, tmp, o);
}

}  // namespace

TokenStepFn token_step_avx512_kernel() { return &kernel; }

}  // namespace polykv::gdn
