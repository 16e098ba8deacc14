// The Gated DeltaNet's per-token state update (gated_delta_math.h's token_step_ref) in SIMD forms, the
// hot loop of a hybrid model's decode and verify steps and of the recurrent state's rollback replay.
//
// Contract: token_step_fast gives token_step_ref's bits exactly, for every d and every input, on every
// ISA: each output element is the same chain of IEEE multiplies and adds in the same order (the columns j
// are independent, so lanes over j change no order; no fused multiply-add). The step and its replay
// (kv/recurrent_state.cpp) call it alike, so a replayed state is the state the step computed.
// Chosen once per call on core/isa.h's active_isa() (avx512 > avx2 > the reference; neon > the reference).
#pragma once

namespace polykv::gdn {

// Same arguments as token_step_ref: S0 [d][d] the state before the token, S [d][d] after (S0 == S: in
// place, else no overlap); k, q, v, o, tmp [d]; q == nullptr: no output.
using TokenStepFn = void (*)(const float* S0, float* S, const float* k, const float* v, const float* q, float decay,
                             float beta, int d, float* tmp, float* o);

void token_step_fast(const float* S0, float* S, const float* k, const float* v, const float* q, float decay,
                     float beta, int d, float* tmp, float* o);

// ISA kernels (nullptr where this build or target has none: gated_delta_kernels_nonx86.cpp).
TokenStepFn token_step_avx2_kernel();
TokenStepFn token_step_avx512_kernel();
#if defined(__aarch64__)
TokenStepFn token_step_neon_kernel();  // gated_delta_kernels_neon.cpp
#endif

}  // namespace polykv::gdn
