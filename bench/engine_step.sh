#!/usr/bin/env bash
# The engine's host time per agent and decode step, old paths against new (POLYKV_ENGINE_STEP=old,
# engine/step_switch.h), interleaved, on the CPU: tests/engine_step_bench_test.cpp's disabled bench
# (32 layers of width 64, a 128256 vocabulary, 513 blocks per agent). One JSON line per run.
#   bench/engine_step.sh [REPS=3] [OUT=docs/results/agenthost-2026-12-01f/engine_step.jsonl]
# Environment passed through: POLYKV_BENCH_AGENTS (1,16,64), POLYKV_BENCH_CONTEXT, POLYKV_BENCH_BLOCK,
# POLYKV_BENCH_GEN, POLYKV_BENCH_LAYERS. Needs build/polykv_tests (scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-3}
out=${2:-docs/results/agenthost-2026-12-01f/engine_step.jsonl}
mkdir -p "$(dirname "$out")"
: > "$out"
for ((r = 0; r < reps; r++)); do
  for mode in old new; do
    POLYKV_ENGINE_STEP=$mode build/polykv_tests --gtest_also_run_disabled_tests \
      --gtest_filter='EngineStep.DISABLED_HostTimePerAgentStep' 2>/dev/null |
      grep '^{' | sed "s/^{/{\"rep\": $r, \"uptime\": \"$(uptime | sed 's/.*load average: //')\", /" | tee -a "$out"
  done
done
python3 bench/engine_step_summary.py "$out"
