#!/usr/bin/env bash
# 2026-12-03 call P1, main as landed (stop 27): (1) the hybrid (Gated DeltaNet) and shared-prefix GPU tests;
# (2) the first speed figures of a hybrid on the GPU: synth qwen3.5-9b q4_0, prefill pp512 / pp4096 and decode at
# depth 0, KV q8_0/turbo3t, and a kernel timeline of one pp4096 prefill (where the token-sequential delta rule
# stands); (3) call N4 of stop 27, not run then: 1, 16 and 64 agents on one shared 32k context (llama-3.1-8b q4_0).
source scripts/gpu-lib.sh; call_setup
M=/tmp/llama-3.1-8b-q4_0.gguf; H=/tmp/qwen3.5-9b-q4_0.gguf; t0=$SECONDS
( $P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 4 > /dev/null 2>&1 ) &
( $P synth --shape qwen3.5-9b --type q4_0 -o $H --threads 4 > /dev/null 2>&1 ) &
gtest_shards 4 110 '*Gdn*:*Hybrid*:CudaAttentionPrefix.*:CudaAttentionSinks.*:CudaAttention.SharedPrefix*:*EngineCuda*:-*DISABLED*:*Speed*:*Bench*:*Emulation*'
timeout 60 $T --gtest_also_run_disabled_tests --gtest_filter='GdnCuda.DISABLED_*' > $OUT/gdn-speed.log 2>&1
grep -E '^(decode|prefill|prompt)|us per' $OUT/gdn-speed.log >> $SUMMARY
wait
note "synth done at $((SECONDS-t0)) s; $(ls -la $H $M | awk '{print $5, $9}' | paste -sd' ')"
B="--device cuda --json --bandwidth 4240"
for rep in 1 2; do
  for p in 512 4096; do
    timeout 90 $P bench -m $H $B -p $p -n 64 -r 2 -ctk q8_0 -ctv turbo3t 2>>$OUT/bench.err | grep '^{' >> $OUT/hybrid.jsonl
    note "qwen3.5-9b pp$p ($((SECONDS-t0)) s): $(tail -1 $OUT/hybrid.jsonl | grep -oE '"(prefill|decode)_tok_s_reps":\[[0-9.,]+\]' | paste -sd' ')"
  done
done
CUDA_INJECTION64_PATH=$PWD/build-gpu/lib/libpolykv_cuda_trace.so POLYKV_TRACE=$OUT/t.csv timeout 60 \
  $P bench -m $H $B -p 4096 -n 0 -r 1 -ctk q8_0 -ctv turbo3t >/dev/null 2>>$OUT/bench.err
python3 scripts/cuda_trace_totals.py $OUT/t.csv --top 30 > $OUT/trace-pp4096-qwen35.txt 2>&1; rm -f $OUT/t.csv
head -12 $OUT/trace-pp4096-qwen35.txt >> $SUMMARY
timeout 200 $P bench-agents -m $M --device cuda --agents 1,16,64 --share on --context 32768 --suffix 32 --gen 32 -r 3 --json \
  2>> $OUT/bench.err | grep '^{' >> $OUT/agents.jsonl
note "agents ($((SECONDS-t0)) s): $(grep -oE '"agents":[0-9]+|"decode_tok_s":[0-9.]+' $OUT/agents.jsonl | paste -sd' ')"
note "done at $((SECONDS-t0)) s"
grep -i "error" $OUT/bench.err | sort | uniq -c | head -5 >> $SUMMARY
cd $OUT && tar cJf logs.tar.xz shard*.log bench.err && rm -f shard*.log bench.err
