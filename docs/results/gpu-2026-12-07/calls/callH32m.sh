#!/usr/bin/env bash
# Call H32m (2026-12-07): H32 cut to what the last device minutes hold: the tests of the small float mat-vec and
# the MoE paths, then qwen3-30b-a3b q4_0 decode, main vs new, 2 rounds interleaved (order reversed).
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
mkdir -p $OUT/logs
xz -dc .gpucarry/polykv-main.xz > build-gpu/polykv-main && chmod +x build-gpu/polykv-main
B=build-gpu/polykv-main M=/tmp/q3moe-q4_0.gguf
[ -s $M ] || timeout 150 $P synth --shape qwen3-30b-a3b --type q4_0 -o $M --threads 12 > $OUT/logs/synth-q3.log 2>&1 &
timeout 90 $T --gtest_filter='MatmulCuda.FloatRegsKernelSameBits:*MoeV2Cuda*:*MoeV2ModelCuda*:*MoeModelCuda*:*GptOssCuda*' --gtest_color=no > $OUT/tests.log 2>&1
note "tests: rc=$? ($((SECONDS-t0)) s) $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' $OUT/tests.log | paste -sd' ')"
grep -E '^\[  FAILED|Failure' $OUT/tests.log | head -20 >> $SUMMARY
wait
pk() {  # pk BIN ROUND TAG [ENV]
  if [ $((SECONDS-t0)) -gt ${LIMIT:-250} ]; then note "skip $3 r$2 (time)"; return; fi
  env $4 timeout 45 $1 bench -m $M --device cuda -r 3 --json -p 0 -n 128 -ctk f16 -ctv f16 2>>$OUT/logs/polykv.err | grep '^{' | sed "s/^{/{\"round\":$2,\"tag\":\"$3\",/" >> $OUT/polykv.jsonl
  note "$3 r$2 ($((SECONDS-t0)) s): $(grep "\"round\":$2,\"tag\":\"$3\"" $OUT/polykv.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]')"
}
pk $B 1 main; pk $P 1 new; pk $P 2 new; pk $B 2 main
pk $P 3 regs0 POLYKV_CUDA_MATVEC_REGS=0; pk $P 3 defer0 POLYKV_CUDA_DEFER_NORM=0; pk $P 3 new
note "done ($((SECONDS-t0)) s)"
