#!/usr/bin/env bash
# Many agents on one 32k context on the GPU, the engine's host paths old against new, interleaved
# (docs/ENGINE_STEP.md). Runs ON the GPU machine from the repository root with build-gpu/ beside it
# (as bench/gpu_bench.sh); writes $OUT/engine_step_gpu.jsonl (`polykv bench-agents --json` lines, each
# with "engine_step" and "sample_threads" added) and $OUT/engine_step_gpu.log.
#   modes: old (POLYKV_ENGINE_STEP=old), new1 (new, POLYKV_ENGINE_SAMPLE_THREADS=0: sampling on the
#   step thread only), new (new, default sample threads). Environment: REPS (2), AGENTS (1,16,64).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BIN=${GPU_BENCH_BIN:-build-gpu}
export LD_LIBRARY_PATH=$PWD/$BIN/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
REPS=${REPS:-2}
AGENTS=${AGENTS:-1,16,64}
m=/tmp/llama-3.1-8b-q4_0.gguf
[[ -s $m ]] || "$BIN/polykv" synth --shape llama-3.1-8b --type q4_0 -o "$m" --threads "$(nproc)" >>"$OUT/engine_step_gpu.log" 2>&1
for ((r = 0; r < REPS; r++)); do
  for mode in old new1 new; do
    case $mode in
      old) env=(POLYKV_ENGINE_STEP=old) ;;
      new1) env=(POLYKV_ENGINE_STEP=new POLYKV_ENGINE_SAMPLE_THREADS=0) ;;
      new) env=(POLYKV_ENGINE_STEP=new) ;;
    esac
    echo "==== rep $r $mode $(uptime)" >>"$OUT/engine_step_gpu.log"
    env "${env[@]}" timeout -k 5 150 "$BIN/polykv" bench-agents -m "$m" --device cuda --agents "$AGENTS" --share on \
      --context 32768 --suffix 32 --gen 32 --json 2>>"$OUT/engine_step_gpu.log" |
      sed "s/^{/{\"mode\": \"$mode\", \"rep\": $r, /" | tee -a "$OUT/engine_step_gpu.jsonl"
  done
done
python3 - "$OUT/engine_step_gpu.jsonl" <<'PY'
import json, sys, statistics
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print("| agents | mode | aggregate decode tok/s | host ms / agent / decode step | forward ms / decode step |")
print("|---|---|---|---|---|")
for n in sorted({r["agents"] for r in rows}):
    for mode in ("old", "new1", "new"):
        rs = [r for r in rows if r["agents"] == n and r["mode"] == mode]
        if not rs: continue
        med = lambda f: statistics.median(f(r) for r in rs)
        print(f"| {n} | {mode} | {med(lambda r: r['decode_tok_s']):.1f} | {med(lambda r: r['host_ms_per_agent_step']):.4f} "
              f"| {med(lambda r: 1e3 * r['decode_only_forward_s'] / max(1, r['decode_only_steps'])):.2f} |")
PY
