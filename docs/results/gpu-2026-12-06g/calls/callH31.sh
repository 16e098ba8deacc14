#!/usr/bin/env bash
# Call H31 (written 2026-12-06g, NOT RUN): the one-wave rule for routing inside the gate+up launch
# (one-wave-route.patch applied to main, built with scripts/gpu-build.sh, carried as build-gpu.tar.xz) against
# main's polykv (carried as .gpucarry/polykv-main.xz). Carry also .gpucarry/fixtures (qwen3moe + gptoss sets).
# 1. The MoE GPU tests (MoeV2Cuda's three arms: routing kernel + five kernels, fused routing inside, fused routing
#    first) while synth makes qwen3-30b-a3b q4_0 and gpt-oss-20b q4_0.
# 2. Decode at depth 0, f16/f16, main vs this build, 2 rounds interleaved (order reversed in round 2): gpt-oss
#    should now equal the five kernels (H30c: noroute 0.996x of them, routing inside 0.974x), qwen3 stay the same.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
xz -dc .gpucarry/polykv-main.xz > build-gpu/polykv-main && chmod +x build-gpu/polykv-main
B=build-gpu/polykv-main
M=/tmp/q3moe-q4_0.gguf G=/tmp/gptoss-q4_0.gguf
[ -s $M ] || timeout 200 $P synth --shape qwen3-30b-a3b --type q4_0 -o $M --threads 8 > $OUT/synth-q3.log 2>&1 &
[ -s $G ] || timeout 200 $P synth --shape gpt-oss-20b --type q4_0 -o $G --threads 8 > $OUT/synth-gpt.log 2>&1 &
timeout 80 $T --gtest_filter='*MoeV2Cuda*:*MoeModelCuda*:*GptOssCuda*' --gtest_color=no > $OUT/tests.log 2>&1
note "tests: rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' $OUT/tests.log | paste -sd' ')"
grep -E '^\[  FAILED|Failure' $OUT/tests.log | head -20 >> $SUMMARY
wait
pk() {  # pk BIN ROUND TAG MODEL
  timeout 60 $1 bench -m $4 --device cuda -r 3 --json -p 0 -n 128 -ctk f16 -ctv f16 2>>$OUT/polykv.err | grep '^{' | sed "s/^{/{\"round\":$2,\"tag\":\"$3\",/" >> $OUT/polykv.jsonl
  note "$3 r$2 ($((SECONDS-t0)) s): $(grep "\"round\":$2,\"tag\":\"$3\"" $OUT/polykv.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]')"
}
for r in 1 2; do
  for m in $G $M; do
    b=$(basename $m .gguf)
    if [ $r = 1 ]; then pk $B $r main-$b $m; pk $P $r wave-$b $m; else pk $P $r wave-$b $m; pk $B $r main-$b $m; fi
  done
done
