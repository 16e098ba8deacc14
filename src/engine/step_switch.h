// POLYKV_ENGINE_STEP=old selects the engine's host paths of before 2026-12-01f (read once), so one
// binary compares old and new (bench/engine_step.sh, docs/ENGINE_STEP.md): the scalar greedy argmax,
// a block table rebuilt for every sequence at every step, sampling on the step thread only.
// Anything else, or unset: the new paths. Both give the same tokens.
#pragma once

#include "backend/backend.h"

namespace polykv {

bool engine_step_old();

// Whether plain greedy rows take their argmax from the backend (Model::BatchSeq::argmax: 4 bytes copied
// back instead of a 0.5 MB logit row at 128k vocabularies, 32 MB a 64-agent step): POLYKV_ENGINE_ARGMAX=
// device|host (read at each call: callers ask once per engine or loop); unset: on every backend but the
// CPU's (whose logits are already in host memory, where engine/argmax.h's vector kernels scan them).
// POLYKV_ENGINE_STEP=old: host. The engine, generate() (`run`) and `bench`'s decode loop ask this.
bool device_argmax(DeviceKind kind);

// Whether generate() and bench pipeline their greedy steps on a backend argmax (Model::BatchSeq::
// token_from_last_argmax: the next step issued before the host reads the token). POLYKV_GREEDY_PIPELINE=0:
// one step at a time (read at each call). Same tokens either way.
bool pipelined_greedy();

}  // namespace polykv
