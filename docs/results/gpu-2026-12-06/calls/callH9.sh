#!/usr/bin/env bash
# 2026-12-06 call H9 (H8 cut to the ~170 s of device time left): every GPU correctness test ('*Cuda*:*GPU*', 4 shards
# of at most 100 s) while q4_K is synthesized, then q4_K pp512 at prefill tile bounds 64 (default) / 32 / 16 MiB.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
BW=3350; nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && BW=4800
timeout 150 $P synth --shape llama-3.1-8b --type q4_K -o /tmp/l8-q4_K.gguf --threads 14 >>$OUT/synth.log 2>&1 &
gtest_shards 4 100 '*Cuda*:*GPU*:-*DISABLED*'
note "synth done at $((SECONDS-t0)) s"
for mb in 64 32 16; do
  POLYKV_CUDA_PREFILL_TILE_MB=$mb timeout 30 $P bench -m /tmp/l8-q4_K.gguf --device cuda -ctk f16 -ctv f16 -d 0 -p 512 -n 1 -r 3 \
    --bandwidth $BW --json 2>>$OUT/bench.err | grep '^{' | sed "s/^{/{\"arm\":\"tile$mb\",/" >>$OUT/pp.jsonl
  note "q4_K p512 tile $mb MiB ($((SECONDS-t0)) s): $(tail -1 $OUT/pp.jsonl | grep -oE '"prefill_tok_s_reps":\[[^]]*\]' | tr -d '"')"
done
cd $OUT && tar cJf h9-logs.tar.xz synth.log bench.err shard*.log && rm -f synth.log bench.err shard*.log
note "done at $((SECONDS-t0)) s"
