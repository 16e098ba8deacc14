#!/usr/bin/env bash
# Call H35 (2026-12-07c): the x-activations patch of 2026-12-07b (POLYKV_CUDA_MOE_XACTS) plus two changes to the
# fused one-token FFN's down weights: each gate+up block asks L2 for its share of its expert's down matrix
# (POLYKV_CUDA_MOE_DOWN_PREFETCH), and the down launch's register cap where its grid would not fit one wave
# (POLYKV_CUDA_MOE_DOWN_WAVE).
# 1. Tests: MoeV2Cuda (the x-acts case; the fused path with prefetch and cap on / off against the five kernels'
#    bits), the MoE fixture goldens, DeferredNormCuda, while synth makes the two files.
# 2. Decode at depth 0, f16/f16, qwen3-30b-a3b and gpt-oss-20b q4_0: new / xacts0 / pf0 / wave0 / base (all three
#    off), 2 rounds interleaved (order reversed in round 2).
# 3. Nsight Compute on gate+up and down (new) of one qwen3 token if time is left.
# Carry .gpucarry/build-gpu.tar.xz and .gpucarry/fixtures (qwen3moe + gptoss sets).
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
mkdir -p $OUT/logs
M=/tmp/q3moe-q4_0.gguf G=/tmp/gptoss-q4_0.gguf
[ -s $M ] || timeout 200 $P synth --shape qwen3-30b-a3b --type q4_0 -o $M --threads 8 > $OUT/logs/synth-q3.log 2>&1 &
[ -s $G ] || timeout 200 $P synth --shape gpt-oss-20b --type q4_0 -o $G --threads 8 > $OUT/logs/synth-gpt.log 2>&1 &
timeout 150 $T --gtest_filter='*MoeV2Cuda*:*MoeModelCuda*:*GptOssCuda*:*Qwen3Moe*Cuda*:DeferredNormCuda.*' --gtest_color=no > $OUT/tests.log 2>&1
note "tests: rc=$? ($((SECONDS-t0)) s) $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' $OUT/tests.log | paste -sd' ')"
grep -E '^\[  FAILED|Failure' $OUT/tests.log | head -20 >> $SUMMARY
wait
note "synth done ($((SECONDS-t0)) s)"
pk() {  # pk ROUND TAG MODEL [ENV...]
  if [ $((SECONDS-t0)) -gt ${LIMIT:-260} ]; then note "skip $2 r$1 (time)"; return; fi
  local r=$1 tag=$2 m=$3; shift 3
  env "$@" timeout 60 $P bench -m $m --device cuda -r 3 --json -p 0 -n 128 -ctk f16 -ctv f16 2>>$OUT/logs/polykv.err | grep '^{' | sed "s/^{/{\"round\":$r,\"tag\":\"$tag\",/" >> $OUT/polykv.jsonl
  note "$tag r$r ($((SECONDS-t0)) s): $(grep "\"round\":$r,\"tag\":\"$tag\"" $OUT/polykv.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]')"
}
arms() {  # arms ROUND MODEL: the five arms in the round's order
  local r=$1 m=$2 b=$(basename $2 .gguf)
  local -a order=(new xacts0 pf0 wave0 base)
  [ $r = 2 ] && order=(base wave0 pf0 xacts0 new)
  for a in "${order[@]}"; do
    case $a in
      new) pk $r new-$b $m ;;
      xacts0) pk $r xacts0-$b $m POLYKV_CUDA_MOE_XACTS=0 ;;
      pf0) pk $r pf0-$b $m POLYKV_CUDA_MOE_DOWN_PREFETCH=0 ;;
      wave0) pk $r wave0-$b $m POLYKV_CUDA_MOE_DOWN_WAVE=0 ;;
      base) pk $r base-$b $m POLYKV_CUDA_MOE_XACTS=0 POLYKV_CUDA_MOE_DOWN_PREFETCH=0 POLYKV_CUDA_MOE_DOWN_WAVE=0 ;;
    esac
  done
}
for r in 1 2; do for m in $M $G; do arms $r $m; done; done
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
for k in moe_gate_up_act_kernel moe_down_sum_kernel; do
  if [ $((SECONDS-t0)) -lt ${NCU_LIMIT:-330} ]; then
    timeout 60 $NCU --graph-profiling node -k regex:$k --launch-skip 60 --launch-count 1 --set full \
      $P bench -m $M --device cuda -ctk f16 -ctv f16 -d 0 -p 0 -n 4 -r 1 > $OUT/ncu-$k.txt 2>&1
    note "ncu $k rc=$? ($((SECONDS-t0)) s): $(grep -E '^ +(Duration|DRAM Throughput|Executed Instructions|Registers Per Thread|Waves Per SM) ' $OUT/ncu-$k.txt | head -5 | awk '{$1=$1};1' | paste -sd'|')"
    xz -9 $OUT/ncu-$k.txt
  fi
done
note "done ($((SECONDS-t0)) s)"
