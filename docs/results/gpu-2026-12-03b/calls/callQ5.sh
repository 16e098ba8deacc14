#!/usr/bin/env bash
# 2026-12-03 (second session) call Q5, main with long prompt passes on the 256-row kernel (attn::prefill256): (1) the
# attention, model, engine and generate GPU tests; (2) llama-3.1-8b q4_0 prefill pp4096 and pp16384, KV q8_0/turbo3t,
# the 256-row kernel (default) against POLYKV_CUDA_PREFILL256=0 (the 64-row tiled kernel), interleaved, 2 rounds.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS; M=/tmp/llama-3.1-8b-q4_0.gguf
( $P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 8 > /dev/null 2>&1 ) &
gtest_shards 8 110 '*CudaAttention*:*ModelCuda*:*EngineCuda*:*GenerateCuda*:*SpecInvarianceCuda*:-*DISABLED*:*Emulation*:*Bench*'
note "synth and tests done at $((SECONDS-t0)) s"
B="--device cuda --json --bandwidth 4240 -n 0 -ctk q8_0 -ctv turbo3t"
for round in 1 2; do
  for p in 4096 16384; do
    for v in w256 tiled64; do
      e=; [ $v = tiled64 ] && e=POLYKV_CUDA_PREFILL256=0
      env $e timeout 60 $P bench -m $M $B -p $p -r 3 2>>$OUT/bench.err | grep '^{' | sed "s/^{/{\"variant\":\"$v\",/" >> $OUT/prefill256.jsonl
      note "pp$p $v ($((SECONDS-t0)) s): $(tail -1 $OUT/prefill256.jsonl | grep -oE '"prefill_tok_s_reps":[^a-z]+')"
    done
  done
done
note "done at $((SECONDS-t0)) s"
grep -i "error" $OUT/bench.err | sort | uniq -c | head -5 >> $SUMMARY
cd $OUT && tar cJf q5.tar.xz shard*.log bench.err prefill256.jsonl summary.txt && rm -f shard*.log
