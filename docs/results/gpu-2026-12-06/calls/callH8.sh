#!/usr/bin/env bash
# 2026-12-06 call H8: the committed defaults (staged tile dequantization, q5_K's split layout on):
# (0) every GPU correctness test ('*Cuda*:*GPU*', 4 shards; no fixtures carried, so fixture tests skip);
# (1) q5_K with the defaults against POLYKV_CUDA_SPLIT_Q5K=0: bench -p 512 -n 128 -r 3, f16/f16, depth 0, 2 rounds.
# TRIM=1: (0) alone, shards of at most 200 s (for a call with little device time left).
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
BW=3350; nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && BW=4800
[ -z "${TRIM:-}" ] && timeout 300 $P synth --shape llama-3.1-8b --type q5_K -o /tmp/l8-q5_K.gguf --threads 12 >>$OUT/synth.log 2>&1 &
gtest_shards 4 $([ -n "${TRIM:-}" ] && echo 200 || echo 280) '*Cuda*:*GPU*:-*DISABLED*'
[ -n "${TRIM:-}" ] && { cd $OUT && tar cJf h8-logs.tar.xz shard*.log && rm -f shard*.log; exit 0; }
note "synth done at $((SECONDS-t0)) s"
pb() {  # pb ARM ROUND ENV...
  local arm=$1 r=$2; shift 2
  if [ $((SECONDS-t0)) -gt 500 ]; then note "skip $arm r$r (time)"; return; fi
  env "$@" timeout 90 $P bench -m /tmp/l8-q5_K.gguf --device cuda -ctk f16 -ctv f16 -d 0 -p 512 -n 128 -r 3 --bandwidth $BW --json \
    2>>$OUT/bench.err | grep '^{' | sed "s/^{/{\"arm\":\"$arm\",\"round\":$r,\"wtype\":\"q5_K\",/" >>$OUT/pp.jsonl
  note "q5_K $arm r$r ($((SECONDS-t0)) s): $(tail -1 $OUT/pp.jsonl | grep -oE '"(decode|prefill)_tok_s_reps":\[[^]]*\]' | tr -d '"' | paste -sd' ')"
}
for r in 1 2; do
  pb default $r POLYKV_X=1
  pb rows $r POLYKV_CUDA_SPLIT_Q5K=0
done
cd $OUT && tar cJf h8-logs.tar.xz synth.log bench.err shard*.log && rm -f synth.log bench.err shard*.log
note "done at $((SECONDS-t0)) s"
