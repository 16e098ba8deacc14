#!/usr/bin/env bash
# 2026-12-03 call P3, main 5b1b… (the tiled tensor-core attention kernel at head size 256): (1) the attention, GDN
# and model GPU tests; (2) prefill and decode of synth qwen3.5-9b and gemma-3-4b (head size 256) in q4_0, KV
# q8_0/turbo3t, the tensor-core tiled kernel (default) against the f32 one (POLYKV_CUDA_ATTN_MMA=0), interleaved, 2
# rounds; (3) the pp4096 kernel timeline of qwen3.5-9b now; (4) stop 27's call N4: 1, 16 and 64 agents on one
# shared 32k context (llama-3.1-8b q4_0), 3 repetitions.
source scripts/gpu-lib.sh; call_setup
H=/tmp/qwen3.5-9b-q4_0.gguf; G=/tmp/gemma-3-4b-q4_0.gguf; M=/tmp/llama-3.1-8b-q4_0.gguf; t0=$SECONDS
( $P synth --shape qwen3.5-9b --type q4_0 -o $H --threads 4 > /dev/null 2>&1
  $P synth --shape gemma-3-4b --type q4_0 -o $G --threads 4 > /dev/null 2>&1
  $P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 4 > /dev/null 2>&1 ) &
gtest_shards 4 150 'GdnCuda.*:CudaAttention.*:CudaAttentionPrefix*:CudaAttentionSinks*:CudaAttentionSmallDepth*:*ModelCuda*:GenerateCuda.*:-*DISABLED*:*Speed*:*Bench*:*Emulation*'
wait
note "synth done at $((SECONDS-t0)) s"
B="--device cuda --json --bandwidth 4240"
for round in 1 2; do
  for m in $H $G; do
    for p in 512 4096; do
      for v in mma f32; do
        e=; [ $v = f32 ] && e=POLYKV_CUDA_ATTN_MMA=0
        env $e timeout 60 $P bench -m $m $B -p $p -n 32 -r 2 -ctk q8_0 -ctv turbo3t 2>>$OUT/bench.err | grep '^{' |
          sed "s/^{/{\"variant\":\"$v\",/" >> $OUT/hd256.jsonl
        note "$(basename $m) pp$p $v ($((SECONDS-t0)) s): $(tail -1 $OUT/hd256.jsonl | grep -oE '"(prefill|decode)_tok_s_reps":\[[0-9.,]+\]' | paste -sd' ')"
      done
    done
  done
done
CUDA_INJECTION64_PATH=$PWD/build-gpu/lib/libpolykv_cuda_trace.so POLYKV_TRACE=$OUT/t.csv timeout 60 \
  $P bench -m $H $B -p 4096 -n 0 -r 1 -ctk q8_0 -ctv turbo3t >/dev/null 2>>$OUT/bench.err
python3 scripts/cuda_trace_totals.py $OUT/t.csv --top 30 > $OUT/trace-pp4096-qwen35.txt 2>&1; rm -f $OUT/t.csv
note "trace pp4096 qwen3.5-9b:"; head -8 $OUT/trace-pp4096-qwen35.txt >> $SUMMARY
timeout 200 $P bench-agents -m $M --device cuda --agents 1,16,64 --share on --context 32768 --suffix 32 --gen 32 -r 3 --json \
  2>> $OUT/bench.err | grep '^{' >> $OUT/agents.jsonl
note "agents ($((SECONDS-t0)) s): $(grep -oE '"agents":[0-9]+|"decode_tok_s":[0-9.]+' $OUT/agents.jsonl | paste -sd' ')"
note "done at $((SECONDS-t0)) s"
grep -i "error" $OUT/bench.err | sort | uniq -c | head -5 >> $SUMMARY
cd $OUT && tar cJf logs.tar.xz shard*.log bench.err && rm -f shard*.log bench.err
