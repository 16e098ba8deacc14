#!/usr/bin/env bash
# 2026-12-04e call W4: the wgmma mat-mul's k-step schedules, POLYKV_CUDA_MMQ3_SCHED=GS,DEPTH (k-steps per commit
# group, groups in flight while the warp dequantizes the next): 1,1 (default) 2,1 1,2 2,2. (1) MmqCuda.* with each;
# (2) the mat-mul benchmark (q4_0, q4_K) with each; (3) 64 agents on a shared 32k context, synth llama-3.1-8b q4_0,
# q8_0/turbo3t: the four schedules and mma.sync interleaved, 2 rounds x 2 reps.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS; M=/tmp/llama-3.1-8b-q4_0.gguf
( $P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 8 > /dev/null 2>&1 ) &
mkdir -p $OUT/logs
for sc in 1,1 2,1 1,2 2,2; do
  POLYKV_CUDA_MMQ3_SCHED=$sc gtest_shards 2 100 'MmqCuda.*:-*DISABLED*'
  for f in $OUT/shard*.log; do mv $f $OUT/logs/sched${sc/,/-}-$(basename $f); done
done
wait
note "synth and tests done at $((SECONDS-t0)) s"
for sc in 1,1 2,1 1,2 2,2; do
  POLYKV_CUDA_MMQ3_SCHED=$sc POLYKV_MMQ_BENCH_TYPES=q4_0,q4_K timeout 100 $T --gtest_also_run_disabled_tests \
    --gtest_filter='CudaMmqBench.DISABLED_VsOldPath' > $OUT/logs/mmq-bench-${sc/,/-}.log 2>&1
  note "mmq bench $sc at $((SECONDS-t0)) s"; grep "LAYER n=64\|LAYER n=128" $OUT/logs/mmq-bench-${sc/,/-}.log | tee -a $SUMMARY
done
for round in 1 2; do
  for v in 1,1 2,1 1,2 2,2 mma; do
    e=POLYKV_CUDA_MMQ3_SCHED=$v; [ $v = mma ] && e=POLYKV_CUDA_MMQ_WGMMA=0
    env $e timeout 150 $P bench-agents -m $M --device cuda --agents 1,64 --share on --context 32768 --suffix 32 --gen 32 -r 2 --json \
      2>> $OUT/logs/bench.err | grep '^{' | sed "s/^{/{\"variant\":\"$v\",\"round\":$round,/" >> $OUT/agents.jsonl
    note "$v round $round ($((SECONDS-t0)) s): $(grep "\"variant\":\"$v\",\"round\":$round" $OUT/agents.jsonl | grep -oE '"agents":[0-9]+|"decode_tok_s":[0-9.]+' | paste -sd' ')"
  done
done
note "done at $((SECONDS-t0)) s"
grep -i "error" $OUT/logs/bench.err | sort | uniq -c | head -5 >> $SUMMARY
cd $OUT && tar cJf w4-logs.tar.xz logs && rm -rf logs
