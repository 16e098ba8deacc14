#!/usr/bin/env bash
# 2026-12-02 (sixth session) call M8, final main's build (call M7's): in-graph timelines at depth 32768 of q8_0/turbo3t
# and q8_0/q8_0 (where compressed KV still loses 5%), for the next session.
source scripts/gpu-lib.sh; call_setup
M=/tmp/llama-3.1-8b-q4_0.gguf; t0=$SECONDS
$P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 16 > /dev/null 2>&1
note "synth done at $((SECONDS-t0)) s"
TR=$PWD/build-gpu/lib/libpolykv_cuda_trace.so
for V in turbo3t q8_0; do
  CUDA_INJECTION64_PATH=$TR POLYKV_TRACE=$OUT/trace-d32768-$V.csv timeout 100 $P bench -m $M --device cuda --json --bandwidth 4240 \
    -p 0 -n 32 -d 32768 -r 1 -ctk q8_0 -ctv $V >> $OUT/trace-bench.jsonl 2>> $OUT/trace.err
  python3 scripts/cuda_trace_summary.py $OUT/trace-d32768-$V.csv --skip 4 > $OUT/trace-d32768-q8_0-$V.summary.txt 2>&1
  note "trace d32768 q8_0/$V ($((SECONDS-t0)) s): $(grep -E '^period' $OUT/trace-d32768-q8_0-$V.summary.txt | cut -c1-70)"
  grep -E '^[a-z].*[0-9]$' $OUT/trace-d32768-q8_0-$V.summary.txt | head -12 >> $SUMMARY
done
note "done at $((SECONDS-t0)) s"
rm -f $OUT/trace-d32768-*.csv
