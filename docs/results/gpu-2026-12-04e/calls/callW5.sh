#!/usr/bin/env bash
# 2026-12-04e call W5, the final build: matmul_parts' parts in one launch of the wgmma mat-mul (POLYKV_CUDA_MMQ_FUSE=0:
# one launch per part). (1) Every CUDA GPU test (8 shards; fixtures not carried, their goldens skip; the MTP/draft
# models stayed behind for the 64 MiB limit: SpecCuda.GreedyIdentityNgramDraftMtp left out); (2) 64 agents on a shared
# 32k context, synth llama-3.1-8b q4_0, q8_0/turbo3t: fused / unfused / mma.sync interleaved, 2 rounds x 2 reps.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS; M=/tmp/llama-3.1-8b-q4_0.gguf
( $P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 8 > /dev/null 2>&1 ) &
gtest_shards 8 240 '*Cuda*:*cuda*:-*Emulation*:*DISABLED*:SpecCuda.GreedyIdentityNgramDraftMtp'
mkdir -p $OUT/logs; mv $OUT/shard*.log $OUT/logs/
wait
note "synth and tests done at $((SECONDS-t0)) s"
for round in 1 2; do
  for v in fused unfused mma; do
    e=POLYKV_NONE=1; [ $v = unfused ] && e=POLYKV_CUDA_MMQ_FUSE=0; [ $v = mma ] && e=POLYKV_CUDA_MMQ_WGMMA=0
    env $e timeout 150 $P bench-agents -m $M --device cuda --agents 1,64 --share on --context 32768 --suffix 32 --gen 32 -r 2 --json \
      2>> $OUT/logs/bench.err | grep '^{' | sed "s/^{/{\"variant\":\"$v\",\"round\":$round,/" >> $OUT/agents.jsonl
    note "$v round $round ($((SECONDS-t0)) s): $(grep "\"variant\":\"$v\",\"round\":$round" $OUT/agents.jsonl | grep -oE '"agents":[0-9]+|"decode_tok_s":[0-9.]+' | paste -sd' ')"
  done
done
note "done at $((SECONDS-t0)) s"
grep -i "error" $OUT/logs/bench.err | sort | uniq -c | head -5 >> $SUMMARY
cd $OUT && tar cJf w5-logs.tar.xz logs && rm -rf logs
