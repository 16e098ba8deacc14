#!/usr/bin/env bash
# NOT RUN: five requests (14:02-14:50 UTC) got no machine, and the session's device time went with them.
# Call H47 (2026-12-07e): the spill-free lanes8 kernels against the build before them, at depth 0 where the lanes8
# kernels run. new = this build (lean kernels for f16/f16, q8_0/q8_0, q4_0/q4_0, turbo3t/turbo3t; the self-encoding
# kernels with their types as constants); old = H45's polykv (commit 1801805: every specialized lanes8 kernel spilled
# 48-104 bytes). Also q8_0/turbo3t with POLYKV_CUDA_ATTN_SELF=0 on the new build (the self-encoded K rows, spill-free,
# against none). Synth llama-3.1-8b q4_0 (kept in /tmp when the machine is warm); -n 128 -r 3; 2 rounds interleaved,
# order reversed in round 2.
# Before it (H46 could not get a machine; its model tests dropped: models/ moved aside to fit the old binary), the
# CUDA attention GPU tests in 8 shards (synthetic pools: CudaAttention*, the early start and small depths among
# them); after it, one run each at depth 32768 (-n 32 -r 3) of the issue's KV pairs plus q4_0/q4_0 and q8_0/turbo3t
# at 131072 (-n 32 -r 2), as time allows.
# Carry .gpucarry/build-gpu.tar.xz and .gpucarry/old-polykv.tar.xz.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
mkdir -p $OUT/logs /tmp/old
tar xJf .gpucarry/old-polykv.tar.xz -C /tmp/old
OLD=/tmp/old/build-gpu/polykv
L=/tmp/l8b-q4_0.gguf
[ -s $L ] || timeout 300 $P synth --shape llama-3.1-8b --type q4_0 -o $L --threads 6 > $OUT/logs/synth-l8b.log 2>&1 &
gtest_shards 8 45 'CudaAttentionEarly*:CudaAttentionSmallDepth*:CudaAttentionDecode8*:CudaAttention.*Decode*'
wait
note "tests + synth done ($((SECONDS-t0)) s)"
pk() {  # pk ROUND TAG BIN KV [ENV...]
  if [ $((SECONDS-t0)) -gt ${LIMIT:-150} ]; then note "skip $2 r$1 (time)"; return; fi
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
pd() {  # pd TAG KV DEPTH N REPS
  if [ $((SECONDS-t0)) -gt ${LIMIT:-150} ]; then note "skip $1 (time)"; return; fi
  timeout 100 $P bench -m $L --device cuda -r $5 --json -d $3 -p 0 -n $4 -ctk ${2%/*} -ctv ${2#*/} 2>>$OUT/logs/polykv.err | grep '^{' | sed "s/^{/{\"round\":1,\"tag\":\"$1\",/" >> $OUT/polykv.jsonl
  note "$1 ($((SECONDS-t0)) s): $(grep "\"tag\":\"$1\"" $OUT/polykv.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]')"
}
pd at-q8_0-turbo3-d0 q8_0/turbo3 0 128 3
for kv in q8_0/q8_0 q8_0/turbo3t q8_0/turbo3 turbo3t/turbo3t q4_0/q4_0 f16/f16; do pd at-${kv/\//-}-d32768 $kv 32768 32 3; done
pd at-q8_0-turbo3t-d131072 q8_0/turbo3t 131072 32 2
tar cJf $OUT/shards.tar.xz -C $OUT $(cd $OUT && ls shard*.log) && rm -f $OUT/shard*.log
note "done ($((SECONDS-t0)) s)"
