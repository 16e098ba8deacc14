#!/usr/bin/env bash
# 2026-12-06 call H8: the committed defaults (staged tile dequantization, q5_K's split layout on):
# (0) every GPU correctness test ('*Cuda*:*GPU*', 4 shards; no fixtures carried, so fixture tests skip);
# (1) the prefill tile's bound (POLYKV_CUDA_PREFILL_TILE_MB: 64 = the default, 32, 24, 16; whether a tile that stays
#     in L2 beats fewer, larger GEMMs): q4_K pp512 and pp4096, f16/f16, depth 0, arms interleaved;
# (2) unless TRIM=1: q5_K with the defaults against POLYKV_CUDA_SPLIT_Q5K=0, bench -p 512 -n 128 -r 3, 2 rounds.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
BW=3350; nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && BW=4800
timeout 300 $P synth --shape llama-3.1-8b --type q4_K -o /tmp/l8-q4_K.gguf --threads 8 >>$OUT/synth.log 2>&1 &
[ -z "${TRIM:-}" ] && timeout 300 $P synth --shape llama-3.1-8b --type q5_K -o /tmp/l8-q5_K.gguf --threads 8 >>$OUT/synth.log 2>&1 &
gtest_shards 4 200 '*Cuda*:*GPU*:-*DISABLED*'
note "synth done at $((SECONDS-t0)) s"
pb() {  # pb ARM ROUND TYPE P N ENV...
  local arm=$1 r=$2 ty=$3 p=$4 n=$5; shift 5
  if [ $((SECONDS-t0)) -gt 500 ]; then note "skip $ty $arm r$r (time)"; return; fi
  env "$@" timeout 90 $P bench -m /tmp/l8-$ty.gguf --device cuda -ctk f16 -ctv f16 -d 0 -p $p -n $n -r 3 --bandwidth $BW --json \
    2>>$OUT/bench.err | grep '^{' | sed "s/^{/{\"arm\":\"$arm\",\"round\":$r,\"wtype\":\"$ty\",/" >>$OUT/pp.jsonl
  note "$ty p$p $arm r$r ($((SECONDS-t0)) s): $(tail -1 $OUT/pp.jsonl | grep -oE '"(decode|prefill)_tok_s_reps":\[[^]]*\]' | tr -d '"' | paste -sd' ')"
}
for p in 512 4096; do
  for mb in 64 32 24 16; do pb tile$mb 1 q4_K $p 1 POLYKV_CUDA_PREFILL_TILE_MB=$mb; done
done
if [ -z "${TRIM:-}" ]; then
  for r in 1 2; do
    pb default $r q5_K 512 128 POLYKV_X=1
    pb rows $r q5_K 512 128 POLYKV_CUDA_SPLIT_Q5K=0
  done
fi
cd $OUT && tar cJf h8-logs.tar.xz synth.log bench.err shard*.log && rm -f synth.log bench.err shard*.log
note "done at $((SECONDS-t0)) s"
