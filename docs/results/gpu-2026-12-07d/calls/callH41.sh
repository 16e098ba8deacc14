#!/usr/bin/env bash
# Call H41 (2026-12-07d): the final build (main with the lane-per-value q8_0 / q4_0 store, the fused store reverted).
# 1. Every *Cuda* test in 8 shards with the embedded, MTP-head and draft models carried (H40 carried the qwen3,
#    gemma3, qwen35 and qwen3moe fixtures instead), while synth makes llama-3.1-8b and qwen3-8b in q4_0.
# 2. The lane-per-value store against the block form (POLYKV_CUDA_KV_BLOCK_WARP=0), 2 rounds interleaved (order
#    reversed in round 2): depth 0 llama q8_0/q8_0 and q4_0/q4_0, qwen3-8b q8_0/q8_0; depth 32768 llama q8_0/q8_0.
# Carry .gpucarry/build-gpu.tar.xz and models/*.gguf (the working tree's).
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
mkdir -p $OUT/logs
L=/tmp/l8b-q4_0.gguf Q=/tmp/q3-8b-q4_0.gguf
[ -s $L ] || timeout 300 $P synth --shape llama-3.1-8b --type q4_0 -o $L --threads 4 > $OUT/logs/synth-l8b.log 2>&1 &
[ -s $Q ] || timeout 300 $P synth --shape qwen3-8b --type q4_0 -o $Q --threads 4 > $OUT/logs/synth-q3.log 2>&1 &
gtest_shards 8 240 '*Cuda*'
wait
note "synth done ($((SECONDS-t0)) s)"
pk() {  # pk ROUND TAG MODEL KV DEPTH N [ENV...]
  if [ $((SECONDS-t0)) -gt ${LIMIT:-540} ]; then note "skip $2 r$1 (time)"; return; fi
  local r=$1 tag=$2 m=$3 kv=$4 d=$5 n=$6; shift 6
  env "$@" timeout 100 $P bench -m $m --device cuda -r 3 --json -d $d -p 0 -n $n -ctk ${kv%/*} -ctv ${kv#*/} 2>>$OUT/logs/polykv.err | grep '^{' | sed "s/^{/{\"round\":$r,\"tag\":\"$tag\",/" >> $OUT/polykv.jsonl
  note "$tag r$r ($((SECONDS-t0)) s): $(grep "\"round\":$r,\"tag\":\"$tag\"" $OUT/polykv.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]')"
}
arm() {  # arm ROUND NAME MODEL KV DEPTH N
  local r=$1 a=$2 m=$3 kv=$4 d=$5 n=$6 b=$(basename $3 .gguf)-${4/\//-}-d$5
  case $a in
    new) pk $r new-$b $m $kv $d $n ;;
    base) pk $r base-$b $m $kv $d $n POLYKV_CUDA_KV_BLOCK_WARP=0 ;;
  esac
}
for r in 1 2; do
  a2=(new base); [ $r = 2 ] && a2=(base new)
  for a in "${a2[@]}"; do arm $r $a $L q8_0/q8_0 0 128; done
  for a in "${a2[@]}"; do arm $r $a $L q4_0/q4_0 0 128; done
  for a in "${a2[@]}"; do arm $r $a $Q q8_0/q8_0 0 128; done
  for a in "${a2[@]}"; do arm $r $a $L q8_0/q8_0 32768 32; done
done
tar cJf $OUT/shards.tar.xz -C $OUT $(cd $OUT && ls shard*.log) && rm -f $OUT/shard*.log
note "done ($((SECONDS-t0)) s)"
