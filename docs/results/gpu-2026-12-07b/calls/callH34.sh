#!/usr/bin/env bash
# Call H34 (2026-12-07b): x's 8-bit blocks from the norm, copied by the gate+up launch instead of quantized in each
# of its blocks (moe-x-acts.patch; POLYKV_CUDA_MOE_XACTS=0 turns it off). Short: what ~4 device minutes hold.
# 1. Tests: MoeV2Cuda (its new case: the norm's activations kept across the f32 router, the same bits, the path
#    taken), the MoE fixture goldens, DeferredNormCuda, while synth makes the two files.
# 2. Decode at depth 0, f16/f16, qwen3-30b-a3b and gpt-oss-20b q4_0: xacts0 vs new, 2 rounds interleaved (order
#    reversed in round 2); then Nsight Compute on gate+up (new) if time is left.
# Carry .gpucarry/build-gpu.tar.xz and .gpucarry/fixtures (qwen3moe + gptoss sets).
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
mkdir -p $OUT/logs
M=/tmp/q3moe-q4_0.gguf G=/tmp/gptoss-q4_0.gguf
[ -s $M ] || timeout 200 $P synth --shape qwen3-30b-a3b --type q4_0 -o $M --threads 8 > $OUT/logs/synth-q3.log 2>&1 &
[ -s $G ] || timeout 200 $P synth --shape gpt-oss-20b --type q4_0 -o $G --threads 8 > $OUT/logs/synth-gpt.log 2>&1 &
timeout 120 $T --gtest_filter='*MoeV2Cuda*:*MoeModelCuda*:*GptOssCuda*:*Qwen3Moe*Cuda*:DeferredNormCuda.*' --gtest_color=no > $OUT/tests.log 2>&1
note "tests: rc=$? ($((SECONDS-t0)) s) $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' $OUT/tests.log | paste -sd' ')"
grep -E '^\[  FAILED|Failure' $OUT/tests.log | head -20 >> $SUMMARY
wait
note "synth done ($((SECONDS-t0)) s)"
pk() {  # pk ROUND TAG MODEL [ENV...]
  if [ $((SECONDS-t0)) -gt ${LIMIT:-150} ]; then note "skip $2 r$1 (time)"; return; fi
  local r=$1 tag=$2 m=$3; shift 3
  env "$@" timeout 60 $P bench -m $m --device cuda -r 3 --json -p 0 -n 128 -ctk f16 -ctv f16 2>>$OUT/logs/polykv.err | grep '^{' | sed "s/^{/{\"round\":$r,\"tag\":\"$tag\",/" >> $OUT/polykv.jsonl
  note "$tag r$r ($((SECONDS-t0)) s): $(grep "\"round\":$r,\"tag\":\"$tag\"" $OUT/polykv.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]')"
}
for r in 1 2; do
  for m in $M $G; do
    b=$(basename $m .gguf)
    if [ $r = 1 ]; then pk $r xacts0-$b $m POLYKV_CUDA_MOE_XACTS=0; pk $r new-$b $m
    else pk $r new-$b $m; pk $r xacts0-$b $m POLYKV_CUDA_MOE_XACTS=0; fi
  done
done
if [ $((SECONDS-t0)) -lt ${NCU_LIMIT:-170} ]; then
  NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
  timeout 60 $NCU --graph-profiling node -k regex:moe_gate_up_act_kernel --launch-skip 60 --launch-count 1 --set full \
    $P bench -m $M --device cuda -ctk f16 -ctv f16 -d 0 -p 0 -n 4 -r 1 > $OUT/ncu-gate-up.txt 2>&1
  note "ncu gate+up rc=$? ($((SECONDS-t0)) s): $(grep -E '^ +(Duration|DRAM Throughput|Executed Instructions|Registers Per Thread) ' $OUT/ncu-gate-up.txt | head -4 | awk '{$1=$1};1' | paste -sd'|')"
  xz -9 $OUT/ncu-gate-up.txt
fi
note "done ($((SECONDS-t0)) s)"
