#!/usr/bin/env bash
# Per-kernel time of one CUDA decode step (issue #9), polykv and llama.cpp side by side, run ON the GPU
# machine from the repo root with build-gpu/ carried (scripts/gpu-build.sh) and, for llama.cpp, its
# source as .gpucarry/llama-src.tar.xz (never committed). Nsight Compute (`ncu`) times every kernel of a
# few decode tokens (clocks not locked, caches not flushed: as in a normal run, but serialized), and
# scripts/ncu_table.py sums them per kernel name for one token.
# Output under $OUT: polykv-ncu.csv, llama-ncu.csv, profile.txt (the per-token tables), llama-build.log.
# Environment: POLYKV_GPU_MODEL (/tmp/llama-3.1-8b-q4_0.gguf; synthesized if missing), POLYKV_GPU_BIN,
# PROFILE_LLAMA=0 skips llama.cpp, PROFILE_BUDGET_S (560).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BUDGET=${PROFILE_BUDGET_S:-560}
MODEL=${POLYKV_GPU_MODEL:-/tmp/llama-3.1-8b-q4_0.gguf}
BIN=${POLYKV_GPU_BIN:-build-gpu}
SUMMARY=$OUT/profile.txt
: >"$SUMMARY"
T0=$SECONDS
# shellcheck source=scripts/gpu-lib.sh
source scripts/gpu-lib.sh
setup_gpu_libraries
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
[[ -n $NCU ]] || die "ncu not found"
NCU_ARGS=(--metrics gpu__time_duration.sum,dram__bytes_read.sum --csv --page raw --clock-control none
  --cache-control none --target-processes all)

# llama.cpp's build runs on the CPUs while polykv is profiled on the GPU.
LLAMA=/tmp/llama.cpp
[[ ${PROFILE_LLAMA:-1} != 0 ]] && start_llama_build "$OUT/llama-build.log"

if [[ ! -s $MODEL ]]; then
  stage "synth llama-3.1-8b q4_0" 120 "$OUT/polykv.log" \
    $BIN/polykv synth --shape llama-3.1-8b --type q4_0 -o "$MODEL" --threads 8 || rm -f "$MODEL"
fi
# polykv: prefill 1 token, decode 3 (about 400 kernels per token). POLYKV_PROFILE_ENV adds variables.
stage "ncu polykv decode" 200 "$OUT/polykv.log" \
  env ${POLYKV_PROFILE_ENV:-} "$NCU" "${NCU_ARGS[@]}" --log-file "$OUT/polykv-ncu.log" --export /tmp/pk \
  $BIN/polykv bench -m "$MODEL" --device cuda -p 0 -n 3 -d 0 -r 1
"$NCU" --import /tmp/pk.ncu-rep --csv --page raw >"$OUT/polykv-ncu.csv" 2>>"$OUT/polykv.log"
python3 scripts/ncu_table.py "$OUT/polykv-ncu.csv" polykv >>"$SUMMARY" 2>&1

if [[ -n ${LLAMA_PID:-} ]]; then
  while kill -0 "$LLAMA_PID" 2>/dev/null && (($(left) > 150)); do sleep 5; done
  kill -0 "$LLAMA_PID" 2>/dev/null && { note "llama.cpp build still running: skipped"; kill "$LLAMA_PID"; }
fi
if [[ -x $LLAMA/build/bin/llama-bench ]]; then
  note "llama.cpp built in $((SECONDS - T0)) s (since start)"
  stage "ncu llama.cpp decode" 150 "$OUT/llama.log" \
    "$NCU" "${NCU_ARGS[@]}" --log-file "$OUT/llama-ncu.log" --export /tmp/ll \
    $LLAMA/build/bin/llama-bench -m "$MODEL" -ngl 99 -fa 1 -p 0 -n 3 -r 1
  "$NCU" --import /tmp/ll.ncu-rep --csv --page raw >"$OUT/llama-ncu.csv" 2>>"$OUT/llama.log"
  python3 scripts/ncu_table.py "$OUT/llama-ncu.csv" llama >>"$SUMMARY" 2>&1
  stage "llama-bench plain" 60 "$OUT/llama.log" $LLAMA/build/bin/llama-bench -m "$MODEL" -ngl 99 -fa 1 -p 512 -n 128 -r 3 -o json
fi
stage "polykv bench plain" 60 "$OUT/polykv.log" $BIN/polykv bench -m "$MODEL" --device cuda -p 512 -n 128 -r 3 -ctk f16 -ctv f16
xz -T0 -k "$OUT"/*.csv 2>/dev/null && rm -f "$OUT"/*.csv
note "done in $((SECONDS - T0)) s"
