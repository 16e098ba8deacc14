// ARM64 NEON form of the Gated DeltaNet token step (gated_delta_kernels.h): token_step_ref's bits, 4 columns a
// vector. Contraction is off here (GCC fuses vmulq_f32 + vaddq_f32 into fmla otherwise), as in token_step_ref's TU.
#include "core/fp_contract_off.h"  // first: contraction off for this TU
#include <cstddef>

#include "core/simd_f32_neon.h"
#include "kv/gated_delta_kernels.h"
#include "kv/gated_delta_simd.h"

namespace polykv::gdn {
namespace {

using V = simd_neon::F32x4;

void kernel(const float* S0, float* S, const float* k, const float* v, const float* q, float decay, float beta, int d,
            float* tmp, float* o) {
  simd::token_step<V>(S0, S, k, v, q, decay, beta, d, tmp, o);
}

}  // namespace

TokenStepFn token_step_neon_kernel() { return &kernel; }

}  // namespace polykv::gdn
