#!/usr/bin/env bash
# polykv against llama.cpp on the GPU machine (issue #9), run there from the repo root with build-gpu/
# carried (scripts/gpu-build.sh) and llama.cpp's source as .gpucarry/llama-src.tar.xz (never committed):
#   1. llama.cpp's build starts on the CPUs (~5 min) while polykv's CUDA correctness tests run on the GPU
#      (POLYKV_COMPARE_TESTS, a gtest filter; timings are not taken while the build runs);
#   2. decode tok/s at depth 0: polykv variants (VARIANTS: env settings, below) and llama-bench, interleaved,
#      ROUNDS rounds, each polykv run `bench -p 0 -n 128 -r 3`, llama-bench `-p 0 -n 128 -r 3 -fa 1`;
#      with KV f16/f16 (llama.cpp's default) and polykv's default q8_0/turbo3t;
#   3. prefill pp512 / pp4096 (one round), decode at DEPTHS (default 32768; one run each: the fill is long);
#   4. bench-agents on one shared context when AGENTS is set (e.g. AGENTS=1,16,64; AGENTS_CONTEXT, default 32768);
#   5. Nsight Compute per-kernel times of one polykv decode token (scripts/ncu_table.py; PROFILE=0 skips it).
# Output under $OUT (all but summary.txt packed into results.tar.xz at the end): summary.txt, tests.log, decode.jsonl / prefill.jsonl / depth.jsonl (polykv bench JSON +
# variant/round), llama.jsonl / llama-prefill.jsonl / llama-depth.jsonl, llama-build.log, polykv.log, profile.txt.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BUDGET=${POLYKV_GPU_BUDGET_S:-560}
MODEL=${POLYKV_GPU_MODEL:-/tmp/llama-3.1-8b-q4_0.gguf}
BIN=${POLYKV_GPU_BIN:-build-gpu}
ROUNDS=${ROUNDS:-2}
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
T0=$SECONDS
STAGE_MIN_S=15 STAGE_WIDTH=52
# shellcheck source=scripts/gpu-lib.sh
source scripts/gpu-lib.sh
setup_gpu_libraries
note "commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?'); $(nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader 2>&1)"

LLAMA=/tmp/llama.cpp
start_llama_build "$OUT/llama-build.log"
if [[ ! -s $MODEL ]]; then
  stage "synth llama-3.1-8b q4_0" 120 "$OUT/polykv.log" \
    $BIN/polykv synth --shape llama-3.1-8b --type q4_0 -o "$MODEL" --threads 8 || rm -f "$MODEL"
fi
TESTS=${POLYKV_COMPARE_TESTS:-OpsCuda.*:OpsFusedCuda.*:OpsActsCuda.*:CudaKvStore.*:CudaBackendKv.*:ModelFusedCuda.*:ModelCuda.*:ModelCudaGraphs.*}
stage "tests: $TESTS" 200 "$OUT/tests.log" $BIN/polykv_tests --gtest_filter="$TESTS" --gtest_color=no
grep -E '^\[  (PASSED|FAILED) +\]' "$OUT/tests.log" | head -12 | sed 's/^/     /' >>"$SUMMARY"
grep -E 'Failure|differ|mismatch' "$OUT/tests.log" | head -8 | cut -c1-300 | sed 's/^/     /' >>"$SUMMARY"
# A failing attention kernel must not be benchmarked: fall back to the kernels of before 2026-12-01b.
if grep -qE '^\[  FAILED  \] CudaAttention' "$OUT/tests.log"; then
  export POLYKV_CUDA_ATTN_DECODE=slots POLYKV_CUDA_ATTN_MMA=0
  note "attention tests failed: benchmarks run with POLYKV_CUDA_ATTN_DECODE=slots POLYKV_CUDA_ATTN_MMA=0"
fi
if [[ -n ${ATTN_BENCH:-CudaAttention.DISABLED_AttentionKernels} ]]; then
  stage "bench: ${ATTN_BENCH:-CudaAttention.DISABLED_AttentionKernels}" 120 "$OUT/attention-bench.log" \
    $BIN/polykv_tests --gtest_filter="${ATTN_BENCH:-CudaAttention.DISABLED_AttentionKernels}" \
    --gtest_also_run_disabled_tests --gtest_color=no
fi

if [[ -n ${LLAMA_PID:-} ]]; then
  while kill -0 "$LLAMA_PID" 2>/dev/null && (($(left) > 200)); do sleep 3; done
  kill -0 "$LLAMA_PID" 2>/dev/null && { note "llama.cpp build still running: killed"; kill "$LLAMA_PID"; }
  wait "$LLAMA_PID" 2>/dev/null
fi
HAVE_LLAMA=0
[[ -x $LLAMA/build/bin/llama-bench ]] && HAVE_LLAMA=1 &&
  note "llama.cpp $(tar tJf .gpucarry/llama-src.tar.xz 2>/dev/null | head -1) ready at $((SECONDS - T0)) s"

# Variants: NAME=ENV,ENV (POLYKV_* switches of docs/CUDA_DECODE.md)
VARIANTS=${VARIANTS:-"default= nographs=POLYKV_CUDA_GRAPHS=0"}
part=$(mktemp)
pk() {  # pk VARIANT ROUND CTK CTV
  local name=${1%%=*} envs=${1#*=} e=()
  [[ -n $envs ]] && IFS=, read -r -a e <<<"$envs"
  # shellcheck disable=SC2016
  if stage "polykv $name $3/$4 r$2" 60 "$OUT/polykv.log" env "${e[@]}" bash -c '"$@" >"$0"' "$part" \
    $BIN/polykv bench -m "$MODEL" --device cuda -p 0 -n 128 -d 0 -r 3 -ctk "$3" -ctv "$4" --json --bandwidth 4240; then
    grep '^{' "$part" | sed "s/^{/{\"variant\":\"$name\",\"round\":$2,/" >>"$OUT/decode.jsonl"
    note "     $(grep -oE '"decode_tok_s_reps":\[[^]]*\]' "$part")"
  fi
}
ll() {  # ll ROUND CTK CTV
  if stage "llama-bench $2/$3 r$1" 60 "$OUT/llama.log" bash -c '"$@" >"$0"' "$part" \
    $LLAMA/build/bin/llama-bench -m "$MODEL" -ngl 99 -fa 1 -p 0 -n 128 -r 3 -ctk "$2" -ctv "$3" -o jsonl; then
    sed "s/^{/{\"round\":$1,/" "$part" >>"$OUT/llama.jsonl"
    note "     $(grep -oE '"samples_ts": *\[[^]]*\]' "$part")"
  fi
}
for r in $(seq 1 "$ROUNDS"); do
  ((HAVE_LLAMA)) && ll "$r" f16 f16
  for v in $VARIANTS; do pk "$v" "$r" f16 f16; done
  ((HAVE_LLAMA)) && ll "$r" q8_0 q8_0
  for v in $VARIANTS; do pk "$v" "$r" q8_0 turbo3t; done
done
# Prefill (one round, after decode): pp512 and pp4096, q8_0/turbo3t for polykv, f16/f16 and q8_0/q8_0 for llama.cpp.
for pp in 512 4096; do
  # shellcheck disable=SC2016
  if stage "polykv pp$pp q8_0/turbo3t" 60 "$OUT/polykv.log" bash -c '"$@" >"$0"' "$part" \
    $BIN/polykv bench -m "$MODEL" --device cuda -p "$pp" -n 0 -d 0 -r 3 --json --bandwidth 4240; then
    grep '^{' "$part" | sed "s/^{/{\"variant\":\"pp$pp\",\"round\":1,/" >>"$OUT/prefill.jsonl"
    note "     $(grep -oE '"prefill_tok_s_reps":\[[^]]*\]' "$part")"
  fi
  if ((HAVE_LLAMA)); then
    for kv in f16 q8_0; do
      if stage "llama-bench pp$pp $kv" 60 "$OUT/llama.log" bash -c '"$@" >"$0"' "$part" \
        $LLAMA/build/bin/llama-bench -m "$MODEL" -ngl 99 -fa 1 -p "$pp" -n 0 -r 3 -ctk $kv -ctv $kv -o jsonl; then
        cat "$part" >>"$OUT/llama-prefill.jsonl"
        note "     $(grep -oE '"samples_ts": *\[[^]]*\]' "$part")"
      fi
    done
  fi
done
# Decode at depth (DEPTHS, default 32768; one run each, last: the fill costs the most).
for d in ${DEPTHS:-32768}; do
  for kv in q8_0/turbo3t q8_0/q8_0 f16/f16; do
    # shellcheck disable=SC2016
    stage "polykv d$d $kv" 120 "$OUT/polykv.log" bash -c '"$@" >"$0"' "$part" \
      $BIN/polykv bench -m "$MODEL" --device cuda -p 0 -n 64 -d "$d" -r 2 -ctk "${kv%/*}" -ctv "${kv#*/}" --json \
      --bandwidth 4240 && grep '^{' "$part" | sed "s/^{/{\"variant\":\"d$d\",\"round\":1,/" >>"$OUT/depth.jsonl" &&
      note "     $(grep -oE '"decode_tok_s_reps":\[[^]]*\]' "$part")"
  done
  if ((HAVE_LLAMA)); then
    for kv in f16 q8_0; do
      stage "llama-bench d$d $kv" 90 "$OUT/llama.log" bash -c '"$@" >"$0"' "$part" \
        $LLAMA/build/bin/llama-bench -m "$MODEL" -ngl 99 -fa 1 -p 0 -n 64 -d "$d" -r 2 -ctk $kv -ctv $kv -o jsonl &&
        cat "$part" >>"$OUT/llama-depth.jsonl" && note "     $(grep -oE '"samples_ts": *\[[^]]*\]' "$part")"
    done
  fi
done
# Many agents on one shared context (AGENTS, e.g. "1,16,64"; empty: skipped): KV memory and aggregate decode.
if [[ -n ${AGENTS:-} ]]; then
  # shellcheck disable=SC2016
  stage "polykv bench-agents $AGENTS x ${AGENTS_CONTEXT:-32768}" 240 "$OUT/polykv.log" bash -c '"$@" >"$0"' "$part" \
    $BIN/polykv bench-agents -m "$MODEL" --device cuda --agents "$AGENTS" --share on \
    --context "${AGENTS_CONTEXT:-32768}" --suffix 32 --gen 32 --json &&
    grep '^{' "$part" >>"$OUT/agents.jsonl" && grep -oE '"agents":[0-9]+|"decode_tok_s":[0-9.]+|"kv_peak_bytes":[0-9]+' \
    "$part" | paste -sd' ' | sed 's/^/     /' >>"$SUMMARY"
fi
rm -f "$part"

NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
[[ ${PROFILE:-1} == 0 ]] && NCU=
if [[ -n $NCU ]]; then
  stage "ncu polykv decode" 120 "$OUT/polykv.log" "$NCU" --metrics gpu__time_duration.sum,dram__bytes_read.sum \
    --clock-control none --cache-control none --export /tmp/pk -f \
    $BIN/polykv bench -m "$MODEL" --device cuda -p 0 -n 3 -d 0 -r 1 --bandwidth 4240
  "$NCU" --import /tmp/pk.ncu-rep --csv --page raw >/tmp/pk.csv 2>>"$OUT/polykv.log" &&
    python3 scripts/ncu_table.py /tmp/pk.csv polykv >"$OUT/profile.txt" 2>&1
  head -16 "$OUT/profile.txt" | sed 's/^/     /' >>"$SUMMARY"
  # Details (speed of light, occupancy, warp stalls, scheduler, memory) of the kernels that dominate a
  # decode token, launches of the second token: where each one's time goes.
  stage "ncu details: mat-vec, kv_store, attention" 90 "$OUT/polykv.log" "$NCU" --section SpeedOfLight \
    --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats \
    --section MemoryWorkloadAnalysis --clock-control none -k 'regex:matvec_stream|kv_store|decode_kernel|merge_kernel' \
    --launch-skip 180 --launch-count 12 --log-file "$OUT/ncu-details.txt" \
    $BIN/polykv bench -m "$MODEL" --device cuda -p 0 -n 3 -d 0 -r 1 --bandwidth 4240
fi
note "done in $((SECONDS - T0)) s"
# At most 8 files come back from the GPU machine: everything but summary.txt goes into one archive.
(cd "$OUT" && files=$(ls | grep -v '^summary.txt$' | grep -v '^results.tar.xz$') &&
  [[ -n $files ]] && tar cJf results.tar.xz $files && rm -f $files)
