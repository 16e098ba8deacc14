#!/usr/bin/env bash
# 2026-12-04e call W8: the wgmma mat-mul built for 2 CTAs per SM (POLYKV_CUDA_MMQ3_OCC=2: at most 128 registers, a
# 3-stage ring; the split plan then counts 2 CTAs per SM) against the default (1 CTA, 4 stages): MmqCuda.* with it,
# the mat-mul benchmark (q4_0, q4_K) with each, 64 agents on a shared 32k context (synth llama-3.1-8b q4_0,
# q8_0/turbo3t) occ2 / occ1 interleaved, 1 round x 2 reps.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS; M=/tmp/llama-3.1-8b-q4_0.gguf
( $P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 8 > /dev/null 2>&1 ) &
POLYKV_CUDA_MMQ3_OCC=2 timeout 80 $T --gtest_filter='MmqCuda.*:MatmulPartsCuda.*' > $OUT/occ2-tests.log 2>&1
note "occ2 tests rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' $OUT/occ2-tests.log | paste -sd' ')"
for o in 2 1; do
  POLYKV_CUDA_MMQ3_OCC=$o POLYKV_MMQ_BENCH_TYPES=q4_0,q4_K timeout 60 $T --gtest_also_run_disabled_tests \
    --gtest_filter='CudaMmqBench.DISABLED_VsOldPath' > $OUT/mmq-bench-occ$o.log 2>&1
  note "mmq bench occ$o at $((SECONDS-t0)) s"; grep "LAYER n=64\|LAYER n=128" $OUT/mmq-bench-occ$o.log | tee -a $SUMMARY
done
wait
for v in occ2 occ1; do
  POLYKV_CUDA_MMQ3_OCC=${v#occ} timeout 100 $P bench-agents -m $M --device cuda --agents 1,64 --share on --context 32768 --suffix 32 --gen 32 -r 2 --json \
    2>> $OUT/bench.err | grep '^{' | sed "s/^{/{\"variant\":\"$v\",\"round\":1,/" >> $OUT/agents.jsonl
  note "$v ($((SECONDS-t0)) s): $(grep "\"variant\":\"$v\"" $OUT/agents.jsonl | grep -oE '"agents":[0-9]+|"decode_tok_s":[0-9.]+' | paste -sd' ')"
done
note "done at $((SECONDS-t0)) s"
