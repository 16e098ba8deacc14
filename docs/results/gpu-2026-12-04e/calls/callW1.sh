#!/usr/bin/env bash
# 2026-12-04e call W1: the quantized mat-mul on Hopper's wgmma (matmul_cuda_mmq3_sm90a.cu) against the mma.sync
# kernel (POLYKV_CUDA_MMQ_WGMMA=0). (1) The mmq GPU tests with both kernels, graph rows, engine; (2) the mat-mul
# benchmark (llama-3.1-8b matrices, q4_0 and q4_K, 16..128 columns, old path / mma.sync / wgmma); (3) 64 agents on
# one shared 32k context, synth llama-3.1-8b q4_0, q8_0/turbo3t, wgmma vs mma.sync interleaved, 2 rounds x 2 reps.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS; M=/tmp/llama-3.1-8b-q4_0.gguf
( $P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 8 > /dev/null 2>&1 ) &
gtest_shards 4 150 'MmqCuda.*:CudaGraphRows.*:MatmulPartsCuda.*:MatmulCuda.*:EngineCuda.*:MoeCuda.*:-*DISABLED*'
grep -h "wgmma vs mma.sync" $OUT/shard*.log | sort -u > $OUT/wgmma-vs-mma.txt
wait
note "synth and tests done at $((SECONDS-t0)) s"
POLYKV_MMQ_BENCH_TYPES=q4_0,q4_K timeout 150 $T --gtest_also_run_disabled_tests --gtest_filter='CudaMmqBench.DISABLED_VsOldPath' > $OUT/mmq-bench.log 2>&1
note "mmq bench rc=$? at $((SECONDS-t0)) s"; grep "LAYER" $OUT/mmq-bench.log | tee -a $SUMMARY
for round in 1 2; do
  for v in wgmma mma; do
    e=POLYKV_NONE=1; [ $v = mma ] && e=POLYKV_CUDA_MMQ_WGMMA=0
    env $e timeout 150 $P bench-agents -m $M --device cuda --agents 1,64 --share on --context 32768 --suffix 32 --gen 32 -r 2 --json \
      2>> $OUT/bench.err | grep '^{' | sed "s/^{/{\"variant\":\"$v\",\"round\":$round,/" >> $OUT/agents.jsonl
    note "$v round $round ($((SECONDS-t0)) s): $(grep "\"variant\":\"$v\",\"round\":$round" $OUT/agents.jsonl | grep -oE '"agents":[0-9]+|"decode_tok_s":[0-9.]+|"decode_only_step_s":[0-9.]+' | paste -sd' ')"
  done
done
note "done at $((SECONDS-t0)) s"
grep -i "error" $OUT/bench.err | sort | uniq -c | head -5 >> $SUMMARY
cd $OUT && tar cJf w1-logs.tar.xz shard*.log bench.err && rm -f shard*.log
