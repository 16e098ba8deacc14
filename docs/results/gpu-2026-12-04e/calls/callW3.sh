#!/usr/bin/env bash
# 2026-12-04e call W3: the wgmma mat-mul with its copy addresses set up once per thread (Stager) instead of per chunk.
# (1) MmqCuda.* (both schedules); (2) Nsight Compute of three 64-column launches of a 64-agent decode step (gate, up,
# down by launch order); (3) the mat-mul benchmark (q4_0, q8_0, q4_K, q6_K); (4) 64 agents on a shared 32k context,
# synth llama-3.1-8b q4_0, q8_0/turbo3t: pipe0 / pipe1 / mma.sync interleaved, 2 rounds x 2 reps.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS; M=/tmp/llama-3.1-8b-q4_0.gguf
( $P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 8 > /dev/null 2>&1 ) &
gtest_shards 2 100 'MmqCuda.*:CudaGraphRows.*:-*DISABLED*'
mkdir -p $OUT/logs; mv $OUT/shard0.log $OUT/logs/pipe0-shard0.log; mv $OUT/shard1.log $OUT/logs/pipe0-shard1.log
POLYKV_CUDA_MMQ3_PIPE=1 gtest_shards 2 100 'MmqCuda.*:-*DISABLED*'
mv $OUT/shard*.log $OUT/logs/
wait
note "synth and tests done at $((SECONDS-t0)) s"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
timeout 120 $NCU --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section SourceCounters \
  --section MemoryWorkloadAnalysis --clock-control none --kernel-name-base mangled -k 'regex:mmq3_kernel.*Li8ELb1ELb0E' \
  --launch-skip 4 --launch-count 3 --import-source yes \
  --export /tmp/mmq3 -f $P bench-agents -m $M --device cuda --agents 64 --share on --context 4096 --suffix 32 --gen 4 > /dev/null 2>&1
$NCU --import /tmp/mmq3.ncu-rep --page details > $OUT/logs/ncu-details.txt 2>&1
$NCU --import /tmp/mmq3.ncu-rep --page source --csv --print-source sass > /tmp/mmq3.csv 2>/dev/null
python3 scripts/ncu_stalls.py /tmp/mmq3.csv mmq3 25 > $OUT/logs/stalls.txt 2>&1
python3 scripts/ncu_sass_regions.py /tmp/mmq3.csv mmq3 14 > $OUT/logs/sass-regions.txt 2>&1
note "ncu ($((SECONDS-t0)) s): $(grep -E '^ +(Duration|Grid Size|Registers Per Thread|Issued Warp Per Scheduler|Eligible Warps Per Scheduler|Warp Cycles Per Issued Instruction)' $OUT/logs/ncu-details.txt | tr -s ' ' | paste -sd' ')"
timeout 150 $T --gtest_also_run_disabled_tests --gtest_filter='CudaMmqBench.DISABLED_VsOldPath' > $OUT/logs/mmq-bench.log 2>&1
note "mmq bench at $((SECONDS-t0)) s"; grep "LAYER" $OUT/logs/mmq-bench.log | tee -a $SUMMARY
for round in 1 2; do
  for v in pipe0 pipe1 mma; do
    e=POLYKV_CUDA_MMQ3_PIPE=0; [ $v = pipe1 ] && e=POLYKV_CUDA_MMQ3_PIPE=1; [ $v = mma ] && e=POLYKV_CUDA_MMQ_WGMMA=0
    env $e timeout 150 $P bench-agents -m $M --device cuda --agents 1,64 --share on --context 32768 --suffix 32 --gen 32 -r 2 --json \
      2>> $OUT/logs/bench.err | grep '^{' | sed "s/^{/{\"variant\":\"$v\",\"round\":$round,/" >> $OUT/agents.jsonl
    note "$v round $round ($((SECONDS-t0)) s): $(grep "\"variant\":\"$v\",\"round\":$round" $OUT/agents.jsonl | grep -oE '"agents":[0-9]+|"decode_tok_s":[0-9.]+' | paste -sd' ')"
  done
done
note "done at $((SECONDS-t0)) s"
grep -i "error" $OUT/logs/bench.err | sort | uniq -c | head -5 >> $SUMMARY
cd $OUT && tar cJf w3-logs.tar.xz logs && rm -rf logs
