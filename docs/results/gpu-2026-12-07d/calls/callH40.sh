#!/usr/bin/env bash
# Call H40 (2026-12-07d): the KV rows stored by their producer (POLYKV_CUDA_FUSE_KV_STORE) and the lane-per-value
# q8_0 / q4_0 store (POLYKV_CUDA_KV_BLOCK_WARP).
# 1. Every *Cuda* test in 8 shards (with FuseDecCuda.KvRowsStoredByTheirProducerSameBits, the dense fixture goldens
#    of qwen3 and gemma3 at f32 / f16 KV through the fused store, CudaKvStore.* through the new q8_0 / q4_0 form),
#    while synth makes llama-3.1-8b, qwen3-8b and qwen3-30b-a3b in q4_0.
# 2. Decode at depth 0, 2 rounds interleaved (order reversed in round 2): llama-3.1-8b f16/f16 and q8_0/q8_0, arms
#    new / nofuse (FUSE_KV_STORE=0) / base (both off); qwen3-8b f16/f16 and q8_0/q8_0 new / base; llama q8_0/turbo3t
#    new / base (control: neither change applies); qwen3-30b-a3b f16/f16 new / base. Then llama f16/f16 at depth
#    32768, new / nofuse (the attention no longer starts early after a fused store), if time is left.
# Carry .gpucarry/build-gpu.tar.xz (main + these changes) and .gpucarry/fixtures (qwen3, gemma3, qwen35, qwen3moe).
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
mkdir -p $OUT/logs
L=/tmp/l8b-q4_0.gguf Q=/tmp/q3-8b-q4_0.gguf M=/tmp/q3moe-q4_0.gguf
[ -s $L ] || timeout 300 $P synth --shape llama-3.1-8b --type q4_0 -o $L --threads 3 > $OUT/logs/synth-l8b.log 2>&1 &
[ -s $Q ] || timeout 300 $P synth --shape qwen3-8b --type q4_0 -o $Q --threads 3 > $OUT/logs/synth-q3.log 2>&1 &
[ -s $M ] || timeout 300 $P synth --shape qwen3-30b-a3b --type q4_0 -o $M --threads 3 > $OUT/logs/synth-moe.log 2>&1 &
gtest_shards 8 240 '*Cuda*'
wait
note "synth done ($((SECONDS-t0)) s)"
pk() {  # pk ROUND TAG MODEL KV DEPTH N [ENV...]
  if [ $((SECONDS-t0)) -gt ${LIMIT:-540} ]; then note "skip $2 r$1 (time)"; return; fi
  local r=$1 tag=$2 m=$3 kv=$4 d=$5 n=$6; shift 6
  env "$@" timeout 100 $P bench -m $m --device cuda -r 3 --json -d $d -p 0 -n $n -ctk ${kv%/*} -ctv ${kv#*/} 2>>$OUT/logs/polykv.err | grep '^{' | sed "s/^{/{\"round\":$r,\"tag\":\"$tag\",/" >> $OUT/polykv.jsonl
  note "$tag r$r ($((SECONDS-t0)) s): $(grep "\"round\":$r,\"tag\":\"$tag\"" $OUT/polykv.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]')"
}
arm() {  # arm ROUND NAME MODEL KV
  local r=$1 a=$2 m=$3 kv=$4 b=$(basename $3 .gguf)-${4/\//-}
  case $a in
    new) pk $r new-$b $m $kv 0 128 ;;
    nofuse) pk $r nofuse-$b $m $kv 0 128 POLYKV_CUDA_FUSE_KV_STORE=0 ;;
    base) pk $r base-$b $m $kv 0 128 POLYKV_CUDA_FUSE_KV_STORE=0 POLYKV_CUDA_KV_BLOCK_WARP=0 ;;
  esac
}
for r in 1 2; do
  a3=(new nofuse base); a2=(new base)
  [ $r = 2 ] && { a3=(base nofuse new); a2=(base new); }
  for kv in f16/f16 q8_0/q8_0; do for a in "${a3[@]}"; do arm $r $a $L $kv; done; done
  for kv in f16/f16 q8_0/q8_0; do for a in "${a2[@]}"; do arm $r $a $Q $kv; done; done
  for a in "${a2[@]}"; do arm $r $a $M f16/f16; done
  for a in "${a2[@]}"; do arm $r $a $L q8_0/turbo3t; done
done
pk 1 new-l8b-d32k-f16 $L f16/f16 32768 32
pk 1 nofuse-l8b-d32k-f16 $L f16/f16 32768 32 POLYKV_CUDA_FUSE_KV_STORE=0
pk 2 nofuse-l8b-d32k-f16 $L f16/f16 32768 32 POLYKV_CUDA_FUSE_KV_STORE=0
pk 2 new-l8b-d32k-f16 $L f16/f16 32768 32
tar cJf $OUT/shards.tar.xz -C $OUT $(cd $OUT && ls shard*.log) && rm -f $OUT/shard*.log
note "done ($((SECONDS-t0)) s)"
