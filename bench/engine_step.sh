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
python3 - "$out" <<'PY'
import json, sys, statistics
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| agents | old host ms / agent / step | new | old post ms / agent / step | new |")
print("|---|---|---|---|---|")
for n in sorted({r["agents"] for r in rows}):
    med = lambda mode, key: statistics.median(r[key] for r in rows if r["agents"] == n and r["engine_step"] == mode)
    print(f"| {n} | {med('old','host_ms_per_agent_step'):.4f} | {med('new','host_ms_per_agent_step'):.4f} "
          f"| {med('old','post_ms_per_agent_step'):.4f} | {med('new','post_ms_per_agent_step'):.4f} |")
PY
