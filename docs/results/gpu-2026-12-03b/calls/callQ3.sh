#!/usr/bin/env bash
# 2026-12-03 (second session) call Q3, Q2's build plus the f16 conversion of a parts call's input done once: (0) the
# model, mat-mul and engine GPU tests; then where a long prefill goes now. (1) synth llama-3.1-8b q4_0,
# prefill pp16384 at --ubatch 512 / 4096 / 16384, interleaved, 2 rounds of 3 reps; pp32768 at 4096 / 8192, 1 round;
# (2) kernel timelines of pp4096 and pp16384 at the default (4096); (3) 1 and 64 agents on one shared 32k context
# (the engine's step budget is now 4096 on CUDA: the pool's prefill), 2 reps.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS; M=/tmp/llama-3.1-8b-q4_0.gguf
( $P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 8 > /dev/null 2>&1 ) &
gtest_shards 4 150 '*ModelCuda*:*MatvecSplitCuda*:*Mmq*:*EngineCuda*:*GenerateCuda*:*Prefill*:-*DISABLED*:*Emulation*:*Bench*'
note "synth done at $((SECONDS-t0)) s"
B="--device cuda --json --bandwidth 4240"
for round in 1 2; do
  for ub in 512 4096 16384; do
    timeout 100 $P bench -m $M $B -p 16384 -n 0 -r 3 --ubatch $ub -ctk q8_0 -ctv turbo3t 2>>$OUT/bench.err | grep '^{' >> $OUT/long.jsonl
    note "pp16384 ub$ub ($((SECONDS-t0)) s): $(tail -1 $OUT/long.jsonl | grep -oE '"prefill_tok_s_reps":[^a-z]+')"
  done
done
for ub in 4096 8192; do
  timeout 100 $P bench -m $M $B -p 32768 -n 0 -r 2 --ubatch $ub -ctk q8_0 -ctv turbo3t 2>>$OUT/bench.err | grep '^{' >> $OUT/long.jsonl
  note "pp32768 ub$ub ($((SECONDS-t0)) s): $(tail -1 $OUT/long.jsonl | grep -oE '"prefill_tok_s_reps":[^a-z]+')"
done
for p in 4096 16384; do
  CUDA_INJECTION64_PATH=$PWD/build-gpu/lib/libpolykv_cuda_trace.so POLYKV_TRACE=$OUT/t.csv timeout 100 \
    $P bench -m $M $B -p $p -n 0 -r 1 -ctk q8_0 -ctv turbo3t >/dev/null 2>>$OUT/bench.err
  python3 scripts/cuda_trace_totals.py $OUT/t.csv --top 30 > $OUT/trace-llama-pp$p.txt 2>&1; rm -f $OUT/t.csv
  note "trace llama-3.1-8b pp$p:"; head -12 $OUT/trace-llama-pp$p.txt >> $SUMMARY
done
timeout 200 $P bench-agents -m $M --device cuda --agents 1,64 --share on --context 32768 --suffix 32 --gen 32 -r 2 --json \
  2>> $OUT/bench.err | grep '^{' >> $OUT/agents.jsonl
note "agents ($((SECONDS-t0)) s): $(grep -oE '"agents":[0-9]+|"decode_tok_s":[0-9.]+|"pool_prefill_s":[0-9.]+' $OUT/agents.jsonl | paste -sd' ')"
note "done at $((SECONDS-t0)) s"
grep -i "error" $OUT/bench.err | sort | uniq -c | head -5 >> $SUMMARY
cd $OUT && tar cJf results.tar.xz shard*.log long.jsonl agents.jsonl summary.txt bench.err trace-*.txt
