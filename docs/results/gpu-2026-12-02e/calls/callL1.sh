#!/usr/bin/env bash
# 2026-12-02 (fifth session) call L1, main 1b58772: where a depth-0 decode token goes *inside the graph* (the first
# in-graph timeline: tools/cuda_trace, CUPTI concurrent-kernel records, no serialization), and the backend argmax
# in bench's decode loop against the host's (interleaved, 2 rounds x 3 reps).
# Note: bench printed no JSON in this call (no --bandwidth: the CUDA backend cannot measure it, so bench exits with
# an error after its runs); the timelines are complete. callL2.sh repeats the measurements with --bandwidth 4240.
source scripts/gpu-lib.sh; call_setup
M=/tmp/llama-3.1-8b-q4_0.gguf; t0=$SECONDS
$P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 12 > /dev/null 2>&1
note "synth done at $((SECONDS-t0)) s"
TR=$PWD/build-gpu/lib/libpolykv_cuda_trace.so
ls -la $TR build-gpu/lib | tee -a $SUMMARY
# (1) timelines: depth 0 (64 decode tokens after 512 prompt tokens), both KV pairs, backend argmax; one host-argmax run.
for kv in "f16 f16" "q8_0 turbo3t" "q8_0 q8_0"; do
  set -- $kv
  CUDA_INJECTION64_PATH=$TR POLYKV_TRACE=$OUT/trace-d0-$1-$2.csv timeout 120 $P bench -m $M --device cuda -p 512 -n 64 -r 1 \
    -ctk $1 -ctv $2 --json >> $OUT/trace-bench.jsonl 2>> $OUT/trace.err
  note "trace d0 $1/$2 ($((SECONDS-t0)) s): $(tail -1 $OUT/trace-bench.jsonl | grep -oE '"decode_tok_s":[0-9.]+') $(tail -1 $OUT/trace.err)"
done
POLYKV_ENGINE_ARGMAX=host CUDA_INJECTION64_PATH=$TR POLYKV_TRACE=$OUT/trace-d0-q8_0-turbo3t-host.csv timeout 120 $P bench -m $M \
  --device cuda -p 512 -n 64 -r 1 -ctk q8_0 -ctv turbo3t --json >> $OUT/trace-bench.jsonl 2>> $OUT/trace.err
note "trace d0 host argmax ($((SECONDS-t0)) s): $(tail -1 $OUT/trace-bench.jsonl | grep -oE '"decode_tok_s":[0-9.]+')"
CUDA_INJECTION64_PATH=$TR POLYKV_TRACE=$OUT/trace-d32768-q8_0-turbo3t.csv timeout 150 $P bench -m $M --device cuda -p 0 -n 32 \
  -d 32768 -r 1 -ctk q8_0 -ctv turbo3t --json >> $OUT/trace-bench.jsonl 2>> $OUT/trace.err
note "trace d32768 ($((SECONDS-t0)) s): $(tail -1 $OUT/trace-bench.jsonl | grep -oE '"decode_tok_s":[0-9.]+')"
# (2) backend vs host argmax, depth 0, interleaved, 2 rounds x 3 reps.
for round in 1 2; do
  for kv in "f16 f16" "q8_0 turbo3t"; do
    set -- $kv
    for am in backend host; do
      e=device; [ $am = host ] && e=host
      POLYKV_ENGINE_ARGMAX=$e timeout 100 $P bench -m $M --device cuda -p 512 -n 128 -r 3 -ctk $1 -ctv $2 --json 2>>$OUT/bench.err |
        grep '^{' | sed "s/^{/{\"round\":$round,\"argmax\":\"$am\",/" >> $OUT/d0-argmax.jsonl
      note "r$round $1/$2 $am ($((SECONDS-t0)) s): $(tail -1 $OUT/d0-argmax.jsonl | grep -oE '"decode_tok_s_reps":\[[0-9.,]+\]')"
    done
  done
done
note "done at $((SECONDS-t0)) s"
cd $OUT && xz -9 trace-*.csv; rm -f shard*.log
