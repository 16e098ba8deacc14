#!/usr/bin/env bash
# Call H43 (2026-12-07d): the early-started decode kernel encoding the step's new rows itself (Args::self_kv,
# POLYKV_CUDA_ATTN_SELF=0: off). 1. Every *Cuda* test in 8 shards (embedded, MTP-head and draft models carried:
# ModelCudaEarly.* compares the early start with the plain order bit for bit, CudaAttentionSmallDepth.* the small-depth
# plans with it), while synth makes llama-3.1-8b q4_0. 2. New against self0, 2 rounds interleaved (order reversed in
# round 2): depth 0 f16/f16, q8_0/q8_0, q8_0/turbo3t; depth 32768 q8_0/turbo3t and q8_0/q8_0 (-n 32).
# Carry .gpucarry/build-gpu.tar.xz and models/*.gguf.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
mkdir -p $OUT/logs
L=/tmp/l8b-q4_0.gguf
[ -s $L ] || timeout 300 $P synth --shape llama-3.1-8b --type q4_0 -o $L --threads 6 > $OUT/logs/synth-l8b.log 2>&1 &
gtest_shards 8 200 '*Cuda*'
wait
note "synth done ($((SECONDS-t0)) s)"
pk() {  # pk ROUND TAG KV DEPTH N [ENV...]
  if [ $((SECONDS-t0)) -gt ${LIMIT:-300} ]; then note "skip $2 r$1 (time)"; return; fi
  local r=$1 tag=$2 kv=$3 d=$4 n=$5; shift 5
  env "$@" timeout 100 $P bench -m $L --device cuda -r 3 --json -d $d -p 0 -n $n -ctk ${kv%/*} -ctv ${kv#*/} 2>>$OUT/logs/polykv.err | grep '^{' | sed "s/^{/{\"round\":$r,\"tag\":\"$tag\",/" >> $OUT/polykv.jsonl
  note "$tag r$r ($((SECONDS-t0)) s): $(grep "\"round\":$r,\"tag\":\"$tag\"" $OUT/polykv.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]')"
}
arm() {  # arm ROUND NAME KV DEPTH N
  local r=$1 a=$2 kv=$3 d=$4 n=$5 b=l8b-${3/\//-}-d$4
  case $a in
    new) pk $r new-$b $kv $d $n ;;
    base) pk $r base-$b $kv $d $n POLYKV_CUDA_ATTN_SELF=0 ;;
  esac
}
for r in 1 2; do
  a2=(new base); [ $r = 2 ] && a2=(base new)
  for kv in f16/f16 q8_0/q8_0 q8_0/turbo3t; do for a in "${a2[@]}"; do arm $r $a $kv 0 128; done; done
  for kv in q8_0/turbo3t q8_0/q8_0; do for a in "${a2[@]}"; do arm $r $a $kv 32768 32; done; done
done
tar cJf $OUT/shards.tar.xz -C $OUT $(cd $OUT && ls shard*.log) && rm -f $OUT/shard*.log
note "done ($((SECONDS-t0)) s)"
