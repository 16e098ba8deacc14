#!/usr/bin/env bash
# Call H48 (2026-12-07f): the spill-free lanes8 kernels against the build before them (callH47.sh of 2026-12-07e,
# never run, plus the generic kernel's lean instantiation and head size 64). new = this build: lean kernels
# (decode8_kernel<..., SELF = 0>) for f16/f16, q8_0/q8_0, q4_0/q4_0, turbo3t/turbo3t and for the generic kernel when
# the launch self-encodes nothing; the self-encoding specialized kernels with their types as constants. old = H45's
# polykv (commit 1801805: every specialized lanes8 kernel and the generic one spilled, 48-900 bytes).
# 1. Register use of every lanes8 kernel in both builds (cuobjdump). 2. The CUDA attention GPU tests (8 shards) while
# synth makes llama-3.1-8b (head size 128) and llama-3.2-1b (head size 64) in q4_0. 3. Decode, 2 rounds interleaved,
# order reversed in round 2 (-n 128 -r 3): 8B at depth 0, new vs old for five KV pairs, and q8_0/turbo3t with
# POLYKV_CUDA_ATTN_SELF=0; 1B at depths 0 and 8192: q8_0/turbo3t new, new SELF=0 (lean generic instead of the
# self-encoding generic kernel, which spills 488 bytes at head size 64), old; q8_0/q8_0 new vs old. 4. As time allows,
# 8B at 32768 (-n 32 -r 3) for the issue's KV pairs and q8_0/turbo3t at 131072 (-n 32 -r 2).
# Carry .gpucarry/build-gpu.tar.xz and .gpucarry/old-polykv.tar.xz (models/ and docs/ moved aside to fit).
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
mkdir -p $OUT/logs /tmp/old
tar xJf .gpucarry/old-polykv.tar.xz -C /tmp/old
OLD=/tmp/old/build-gpu/polykv
for b in $P $OLD; do
  echo "== $b" >> $OUT/regs.txt
  cuobjdump --dump-resource-usage $b 2>&1 | grep -E "Function|REG" | paste - - | grep -E "decode8_kernel|decode_tc_kernel" | sed -E 's/ CONSTANT.*//' >> $OUT/regs.txt
done
note "lanes8 kernels with a stack frame: new $(sed -n '/== build-gpu/,/== \/tmp/p' $OUT/regs.txt | grep decode8 | grep -vc 'STACK:0 ') of $(sed -n '/== build-gpu/,/== \/tmp/p' $OUT/regs.txt | grep -c decode8), old $(sed -n '/== \/tmp/,$p' $OUT/regs.txt | grep decode8 | grep -vc 'STACK:0 ') of $(sed -n '/== \/tmp/,$p' $OUT/regs.txt | grep -c decode8)"
L=/tmp/l8b-q4_0.gguf S=/tmp/l1b-q4_0.gguf
[ -s $L ] || timeout 300 $P synth --shape llama-3.1-8b --type q4_0 -o $L --threads 6 > $OUT/logs/synth-l8b.log 2>&1 &
[ -s $S ] || timeout 300 $P synth --shape llama-3.2-1b --type q4_0 -o $S --threads 6 > $OUT/logs/synth-l1b.log 2>&1 &
gtest_shards 8 120 'CudaAttention*:*Decode8*:*DecodeTc*'
wait
note "tests + synth done ($((SECONDS-t0)) s)"
pk() {  # pk ROUND TAG BIN MODEL KV DEPTH [ENV...]
  if [ $((SECONDS-t0)) -gt ${LIMIT:-520} ]; then note "skip $2 r$1 (time)"; return; fi
  local r=$1 tag=$2 bin=$3 m=$4 kv=$5 d=$6; shift 6
  env "$@" timeout 100 $bin bench -m $m --device cuda -r 3 --json -d $d -p 0 -n 128 -ctk ${kv%/*} -ctv ${kv#*/} 2>>$OUT/logs/polykv.err | grep '^{' | sed "s/^{/{\"round\":$r,\"tag\":\"$tag\",/" >> $OUT/polykv.jsonl
  note "$tag r$r ($((SECONDS-t0)) s): $(grep "\"round\":$r,\"tag\":\"$tag\"" $OUT/polykv.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]')"
}
pair() {  # pair ROUND TAG MODEL KV DEPTH: new and old, order by round
  if [ $1 = 1 ]; then pk $1 new-$2 $P $3 $4 $5; pk $1 old-$2 $OLD $3 $4 $5
  else pk $1 old-$2 $OLD $3 $4 $5; pk $1 new-$2 $P $3 $4 $5; fi
}
for r in 1 2; do
  for kv in f16/f16 q8_0/q8_0 q8_0/turbo3t q4_0/q4_0 turbo3t/turbo3t; do pair $r l8b-${kv/\//-}-d0 $L $kv 0; done
  pk $r self0-l8b-q8_0-turbo3t-d0 $P $L q8_0/turbo3t 0 POLYKV_CUDA_ATTN_SELF=0
  for d in 0 8192; do
    pair $r l1b-q8_0-turbo3t-d$d $S q8_0/turbo3t $d
    pk $r self0-l1b-q8_0-turbo3t-d$d $P $S q8_0/turbo3t $d POLYKV_CUDA_ATTN_SELF=0
    pair $r l1b-q8_0-q8_0-d$d $S q8_0/q8_0 $d
  done
done
pd() {  # pd TAG KV DEPTH N REPS
  if [ $((SECONDS-t0)) -gt ${LIMIT:-520} ]; then note "skip $1 (time)"; return; fi
  timeout 100 $P bench -m $L --device cuda -r $5 --json -d $3 -p 0 -n $4 -ctk ${2%/*} -ctv ${2#*/} 2>>$OUT/logs/polykv.err | grep '^{' | sed "s/^{/{\"round\":1,\"tag\":\"$1\",/" >> $OUT/polykv.jsonl
  note "$1 ($((SECONDS-t0)) s): $(grep "\"tag\":\"$1\"" $OUT/polykv.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]')"
}
for kv in q8_0/q8_0 q8_0/turbo3t q8_0/turbo3 turbo3t/turbo3t q4_0/q4_0 f16/f16; do pd at-${kv/\//-}-d32768 $kv 32768 32 3; done
pd at-q8_0-turbo3t-d131072 q8_0/turbo3t 131072 32 2
tar cJf $OUT/shards.tar.xz -C $OUT $(cd $OUT && ls shard*.log) && rm -f $OUT/shard*.log
note "done ($((SECONDS-t0)) s)"
