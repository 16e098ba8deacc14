#!/usr/bin/env bash
# Where the time of a many-agent decode step goes (issue #9), run ON the GPU machine from the repo root
# with build-gpu/ carried (scripts/gpu-build.sh):
#   1. `bench-agents` at AGENTS_SMALL_CONTEXT (default 4096): how aggregate decode grows with agents when
#      attention over the shared context is cheap;
#   2. Nsight Compute over PROFILE_STEPS (2) decode steps of AGENTS_PROFILE (64) rows at 32768 shared keys
#      (POLYKV_CUDA_PROFILE_ROWS opens the profiler window), summed per kernel (scripts/ncu_sum.py);
#   3. ATTN_NCU=1: Nsight Compute sections of the decode attention kernel (decode8_kernel) in the
#      CudaAttention.DISABLED_DecodeBandwidth bench, for the launches ATTN_SKIPS (KV pair x depth, 23 each).
# Output under $OUT: summary.txt, agents-small.json, agents-ncu.txt, attn-ncu-*.txt, logs.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BUDGET=${POLYKV_GPU_BUDGET_S:-560}
MODEL=${POLYKV_GPU_MODEL:-/tmp/llama-3.1-8b-q4_0.gguf}
BIN=${POLYKV_GPU_BIN:-build-gpu}
SUMMARY=$OUT/summary.txt
T0=$SECONDS
STAGE_MIN_S=15 STAGE_WIDTH=52
# shellcheck source=scripts/gpu-lib.sh
source scripts/gpu-lib.sh
setup_gpu_libraries
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
note "commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?'); $(nvidia-smi --query-gpu=name --format=csv,noheader 2>&1)"
if [[ ! -s $MODEL ]]; then
  stage "synth llama-3.1-8b q4_0" 150 "$OUT/polykv.log" \
    $BIN/polykv synth --shape llama-3.1-8b --type q4_0 -o "$MODEL" --threads "$(nproc)" || rm -f "$MODEL"
fi
# shellcheck disable=SC2016
stage "bench-agents ${AGENTS_SMALL:-1,16,64} x ${AGENTS_SMALL_CONTEXT:-4096}" 120 "$OUT/polykv.log" bash -c '"$@" >"$0"' \
  "$OUT/agents-small.json" $BIN/polykv bench-agents -m "$MODEL" --device cuda --agents "${AGENTS_SMALL:-1,16,64}" \
  --share on --context "${AGENTS_SMALL_CONTEXT:-4096}" --suffix 32 --gen 64 --json &&
  grep '^{' "$OUT/agents-small.json" | grep -oE '"agents":[0-9]+|"decode_tok_s":[0-9.]+' | paste -sd' ' |
  sed 's/^/     /' | tee -a "$SUMMARY"
if [[ -n $NCU && ${AGENTS_NCU:-1} != 0 ]]; then
  R=${AGENTS_PROFILE:-64}
  stage "ncu bench-agents $R x 32768" 240 "$OUT/polykv.log" \
    env POLYKV_CUDA_PROFILE_ROWS="$R:8:${PROFILE_STEPS:-2}" "$NCU" --profile-from-start off \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum --csv --page raw --clock-control none --cache-control none \
    --log-file "$OUT/agents-ncu.log" --export /tmp/ag -f \
    $BIN/polykv bench-agents -m "$MODEL" --device cuda --agents "$R" --share on --context 32768 --suffix 32 --gen 32
  "$NCU" --import /tmp/ag.ncu-rep --csv --page raw >/tmp/ag.csv 2>>"$OUT/polykv.log" &&
    python3 scripts/ncu_sum.py /tmp/ag.csv "${PROFILE_STEPS:-2}" "agents $R x 32768" >"$OUT/agents-ncu.txt" 2>&1
  head -25 "$OUT/agents-ncu.txt" | tee -a "$SUMMARY"
fi
if [[ -n $NCU && ${ATTN_NCU:-1} != 0 ]]; then
  stage "DecodeBandwidth bench" 90 "$OUT/attn-bench.txt" $BIN/polykv_tests --gtest_also_run_disabled_tests \
    --gtest_filter=CudaAttention.DISABLED_DecodeBandwidth
  grep -E '^(K/V|f16|q8|turbo|q4)' "$OUT/attn-bench.txt" | tee -a "$SUMMARY"
  for skip in ${ATTN_SKIPS:-46 69 138 161}; do
    stage "ncu decode8 launch $skip" 90 "$OUT/attn-ncu-$skip.txt" "$NCU" -k regex:decode8_kernel --launch-skip "$skip" \
      --launch-count 1 --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
      --section Occupancy --section WarpStateStats --section LaunchStats --section SchedulerStats --section InstructionStats \
      $BIN/polykv_tests --gtest_also_run_disabled_tests --gtest_filter=CudaAttention.DISABLED_DecodeBandwidth
  done
fi
note "done in $((SECONDS - T0)) s"
exit $failed
