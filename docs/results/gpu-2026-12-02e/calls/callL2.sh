#!/usr/bin/env bash
# 2026-12-02 (fifth session) call L2, main 8686775 (tracer with host runtime calls): what the host does in the
# ~350 us (depth 0) / ~830 us (depth 32768) between two decode graphs (call L1's timelines), and bench's backend
# argmax against the host's, interleaved (2 rounds x 3 reps, --bandwidth 4240 as every earlier call).
source scripts/gpu-lib.sh; call_setup
M=/tmp/llama-3.1-8b-q4_0.gguf; t0=$SECONDS
$P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 12 > /dev/null 2>&1
note "synth done at $((SECONDS-t0)) s"
TR=$PWD/build-gpu/lib/libpolykv_cuda_trace.so
B="--device cuda --json --bandwidth 4240"
POLYKV_TRACE_API=1 CUDA_INJECTION64_PATH=$TR POLYKV_TRACE=$OUT/api-d0-q8_0-turbo3t.csv timeout 120 $P bench -m $M $B -p 512 -n 64 -r 1 \
  -ctk q8_0 -ctv turbo3t >> $OUT/trace-bench.jsonl 2>> $OUT/trace.err
note "api trace d0 ($((SECONDS-t0)) s): $(tail -1 $OUT/trace-bench.jsonl | grep -oE '"decode_tok_s":[0-9.]+')"
POLYKV_TRACE_API=1 CUDA_INJECTION64_PATH=$TR POLYKV_TRACE=$OUT/api-d32768-q8_0-turbo3t.csv timeout 150 $P bench -m $M $B -p 0 -n 32 \
  -d 32768 -r 1 -ctk q8_0 -ctv turbo3t >> $OUT/trace-bench.jsonl 2>> $OUT/trace.err
note "api trace d32768 ($((SECONDS-t0)) s): $(tail -1 $OUT/trace-bench.jsonl | grep -oE '"decode_tok_s":[0-9.]+')"
for round in 1 2; do
  for kv in "f16 f16" "q8_0 turbo3t"; do
    set -- $kv
    for am in backend host; do
      e=device; [ $am = host ] && e=host
      POLYKV_ENGINE_ARGMAX=$e timeout 100 $P bench -m $M $B -p 512 -n 128 -r 3 -ctk $1 -ctv $2 2>>$OUT/bench.err |
        grep '^{' | sed "s/^{/{\"round\":$round,\"argmax\":\"$am\",/" >> $OUT/d0-argmax.jsonl
      note "r$round $1/$2 $am ($((SECONDS-t0)) s): $(tail -1 $OUT/d0-argmax.jsonl | grep -oE '"decode_tok_s_reps":\[[0-9.,]+\]')"
    done
  done
done
note "done at $((SECONDS-t0)) s"
tail -5 $OUT/bench.err >> $SUMMARY
cd $OUT && xz -9 *.csv; rm -f shard*.log
