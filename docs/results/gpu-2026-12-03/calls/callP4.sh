#!/usr/bin/env bash
# 2026-12-03 call P4, main with the shared-memory guards of the head-size-256 attention and the chunked delta rule:
# (1) the GDN, attention and model GPU tests again; (2) where a 64-agent decode step on one shared 32k context goes
# (llama-3.1-8b q4_0): a kernel timeline of bench-agents --agents 64, per graph launch and in total, with the prefix
# kernel chosen by default and with the 128-row one (POLYKV_CUDA_PREFIX_MMA=wide128).
source scripts/gpu-lib.sh; call_setup
M=/tmp/llama-3.1-8b-q4_0.gguf; t0=$SECONDS
( $P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 8 > /dev/null 2>&1 ) &
gtest_shards 4 150 'GdnCuda.*:CudaAttention.*:CudaAttentionPrefix*:*ModelCuda*:-*DISABLED*:*Speed*:*Bench*:*Emulation*'
wait
note "synth done at $((SECONDS-t0)) s"
TR=$PWD/build-gpu/lib/libpolykv_cuda_trace.so
for v in default wide128; do
  e=; [ $v = wide128 ] && e=POLYKV_CUDA_PREFIX_MMA=wide128
  env $e CUDA_INJECTION64_PATH=$TR POLYKV_TRACE=$OUT/t.csv timeout 120 $P bench-agents -m $M --device cuda --agents 64 \
    --share on --context 32768 --suffix 32 --gen 32 -r 1 --json 2>>$OUT/bench.err | grep '^{' | sed "s/^{/{\"variant\":\"$v\",/" >> $OUT/agents.jsonl
  python3 scripts/cuda_trace_summary.py $OUT/t.csv --skip 8 --top 20 > $OUT/trace-64agents-$v.summary.txt 2>&1
  python3 scripts/cuda_trace_totals.py $OUT/t.csv --top 25 > $OUT/trace-64agents-$v.totals.txt 2>&1
  rm -f $OUT/t.csv
  note "64 agents $v ($((SECONDS-t0)) s): $(tail -1 $OUT/agents.jsonl | grep -oE '"decode_tok_s":[0-9.]+')"
  head -24 $OUT/trace-64agents-$v.summary.txt >> $SUMMARY
done
note "done at $((SECONDS-t0)) s"
grep -i "error" $OUT/bench.err | sort | uniq -c | head -5 >> $SUMMARY
cd $OUT && tar cJf logs.tar.xz shard*.log bench.err && rm -f shard*.log bench.err
