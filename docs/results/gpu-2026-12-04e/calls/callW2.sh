#!/usr/bin/env bash
# 2026-12-04e call W2: the wgmma mat-mul's two schedules, POLYKV_CUDA_MMQ3_PIPE=0 (default: wait for all wgmmas at
# the end of a chunk, 3 chunks in flight) and =1 (a group in flight across chunks, 2 chunks in flight). (1) MmqCuda.*
# with each; (2) Nsight Compute (stalls, source counters) of one 64-column launch in a 64-agent step with each;
# (3) the mat-mul benchmark with each (q4_0, q4_K); (4) 64 agents on a shared 32k context, synth llama-3.1-8b q4_0,
# q8_0/turbo3t: pipe0 / pipe1 / mma.sync interleaved, 2 rounds x 2 reps.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS; M=/tmp/llama-3.1-8b-q4_0.gguf
( $P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 8 > /dev/null 2>&1 ) &
gtest_shards 2 100 'MmqCuda.*:CudaGraphRows.*:-*DISABLED*'
mv $OUT/shard0.log $OUT/pipe0-shard0.log; mv $OUT/shard1.log $OUT/pipe0-shard1.log
POLYKV_CUDA_MMQ3_PIPE=1 gtest_shards 2 100 'MmqCuda.*:CudaGraphRows.*:-*DISABLED*'
grep -h "wgmma vs mma.sync" $OUT/shard*.log | sort -u > $OUT/pipe1-wgmma-vs-mma.txt
wait
note "synth and tests done at $((SECONDS-t0)) s"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
for p in 0 1; do
  POLYKV_CUDA_MMQ3_PIPE=$p timeout 100 $NCU --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section SourceCounters \
    --section MemoryWorkloadAnalysis --clock-control none -k 'regex:mmq3_kernel' --launch-skip 40 --launch-count 1 --import-source yes \
    --export /tmp/mmq3-$p -f $P bench-agents -m $M --device cuda --agents 64 --share on --context 4096 --suffix 32 --gen 4 > /dev/null 2>&1
  $NCU --import /tmp/mmq3-$p.ncu-rep --page details > $OUT/ncu-details-pipe$p.txt 2>&1
  $NCU --import /tmp/mmq3-$p.ncu-rep --page source --csv --print-source sass > /tmp/mmq3-$p.csv 2>/dev/null
  python3 scripts/ncu_stalls.py /tmp/mmq3-$p.csv mmq3 25 > $OUT/stalls-pipe$p.txt 2>&1
  python3 scripts/ncu_sass_regions.py /tmp/mmq3-$p.csv mmq3 14 > $OUT/sass-regions-pipe$p.txt 2>&1
  note "ncu pipe$p ($((SECONDS-t0)) s): $(grep -E '^ +(Duration|Grid Size|Registers Per Thread|Issued Warp Per Scheduler|Eligible Warps Per Scheduler|Warp Cycles Per Issued Instruction)' $OUT/ncu-details-pipe$p.txt | tr -s ' ' | paste -sd' ')"
done
for p in 0 1; do
  POLYKV_CUDA_MMQ3_PIPE=$p POLYKV_MMQ_BENCH_TYPES=q4_0,q4_K timeout 100 $T --gtest_also_run_disabled_tests \
    --gtest_filter='CudaMmqBench.DISABLED_VsOldPath' > $OUT/mmq-bench-pipe$p.log 2>&1
  note "mmq bench pipe$p at $((SECONDS-t0)) s"; grep "LAYER" $OUT/mmq-bench-pipe$p.log | tee -a $SUMMARY
done
for round in 1 2; do
  for v in pipe0 pipe1 mma; do
    e=POLYKV_CUDA_MMQ3_PIPE=0; [ $v = pipe1 ] && e=POLYKV_CUDA_MMQ3_PIPE=1; [ $v = mma ] && e=POLYKV_CUDA_MMQ_WGMMA=0
    env $e timeout 150 $P bench-agents -m $M --device cuda --agents 1,64 --share on --context 32768 --suffix 32 --gen 32 -r 2 --json \
      2>> $OUT/bench.err | grep '^{' | sed "s/^{/{\"variant\":\"$v\",\"round\":$round,/" >> $OUT/agents.jsonl
    note "$v round $round ($((SECONDS-t0)) s): $(grep "\"variant\":\"$v\",\"round\":$round" $OUT/agents.jsonl | grep -oE '"agents":[0-9]+|"decode_tok_s":[0-9.]+' | paste -sd' ')"
  done
done
note "done at $((SECONDS-t0)) s"
grep -i "error" $OUT/bench.err | sort | uniq -c | head -5 >> $SUMMARY
cd $OUT && tar cJf w2-logs.tar.xz *shard*.log bench.err && rm -f *shard*.log
