// POLYKV_ENGINE_STEP=old selects the engine's host paths of before 2026-12-01f (read once), so one
// binary compares old and new (bench/engine_step.sh, docs/ENGINE_STEP.md): the scalar greedy argmax,
// a block table rebuilt for every sequence at every step, sampling on the step thread only.
// Anything else, or unset: the new paths. Both give the same tokens.
#pragma once

namespace polykv {

bool engine_step_old();

}  // namespace polykv
