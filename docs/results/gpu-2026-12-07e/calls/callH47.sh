#!/usr/bin/env bash
# Call H47 (2026-12-07e): the spill-free lanes8 kernels against the build before them, at depth 0 where the lanes8
# kernels run. new = this build (lean kernels for f16/f16, q8_0/q8_0, q4_0/q4_0, turbo3t/turbo3t; the self-encoding
# kernels with their types as constants); old = H45's polykv (commit 1801805: every specialized lanes8 kernel spilled
# 48-104 bytes). Also q8_0/turbo3t with POLYKV_CUDA_ATTN_SELF=0 on the new build (the self-encoded K rows, spill-free,
# against none). Synth llama-3.1-8b q4_0 (kept in /tmp when the machine is warm); -n 128 -r 3; 2 rounds interleaved,
# order reversed in round 2.
# Carry .gpucarry/build-gpu.tar.xz and .gpucarry/old-polykv.tar.xz (models/ moved aside: not needed).
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
mkdir -p $OUT/logs /tmp/old
tar xJf .gpucarry/old-polykv.tar.xz -C /tmp/old
OLD=/tmp/old/build-gpu/polykv
L=/tmp/l8b-q4_0.gguf
[ -s $L ] || timeout 300 $P synth --shape llama-3.1-8b --type q4_0 -o $L --threads 12 > $OUT/logs/synth-l8b.log 2>&1
note "synth done ($((SECONDS-t0)) s)"
pk() {  # pk ROUND TAG BIN KV [ENV...]
  if [ $((SECONDS-t0)) -gt ${LIMIT:-500} ]; then note "skip $2 r$1 (time)"; return; fi
  local r=$1 tag=$2 bin=$3 kv=$4; shift 4
  env "$@" timeout 100 $bin bench -m $L --device cuda -r 3 --json -d 0 -p 0 -n 128 -ctk ${kv%/*} -ctv ${kv#*/} 2>>$OUT/logs/polykv.err | grep '^{' | sed "s/^{/{\"round\":$r,\"tag\":\"$tag\",/" >> $OUT/polykv.jsonl
  note "$tag r$r ($((SECONDS-t0)) s): $(grep "\"round\":$r,\"tag\":\"$tag\"" $OUT/polykv.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]')"
}
for r in 1 2; do
  for kv in f16/f16 q8_0/q8_0 q8_0/turbo3t q4_0/q4_0 turbo3t/turbo3t; do
    tag=${kv/\//-}-d0
    if [ $r = 1 ]; then pk $r new-$tag $P $kv; pk $r old-$tag $OLD $kv
    else pk $r old-$tag $OLD $kv; pk $r new-$tag $P $kv; fi
  done
  pk $r self0-q8_0-turbo3t-d0 $P q8_0/turbo3t POLYKV_CUDA_ATTN_SELF=0
done
note "done ($((SECONDS-t0)) s)"
