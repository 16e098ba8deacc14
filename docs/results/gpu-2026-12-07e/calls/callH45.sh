#!/usr/bin/env bash
# Call H45 (2026-12-07e): turbo3t/turbo3t and q4_0/q4_0 on the tensor-core decode kernel past one split, q4_0/q4_0's
# specialized lanes8 kernel below. 1. Every *Cuda* test in 8 shards (the final build of 2026-12-07d was never run on
# a GPU; this change), while synth makes llama-3.1-8b q4_0. 2. CudaAttentionDecode8.DISABLED_DecodeModesBench (one
# layer: pairs vs mma, every timed pair, 4096 / 32768 / 131072 keys). 3. Decode, 2 rounds interleaved, order
# reversed in round 2: depth 0 (-n 128 -r 3) q4_0/q4_0 new against POLYKV_CUDA_ATTN_D8=generic (the kernel before);
# depth 32768 (-n 32 -r 3) turbo3t/turbo3t and q4_0/q4_0 new against POLYKV_CUDA_ATTN_D8=pairs (the kernel before);
# depth 131072 (-n 32 -r 2) turbo3t/turbo3t the same; q8_0/q8_0 beside them at every depth (the "never slower"
# reference).
# Carry .gpucarry/build-gpu.tar.xz and models/*.gguf.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
mkdir -p $OUT/logs
L=/tmp/l8b-q4_0.gguf
[ -s $L ] || timeout 300 $P synth --shape llama-3.1-8b --type q4_0 -o $L --threads 6 > $OUT/logs/synth-l8b.log 2>&1 &
gtest_shards 8 200 '*Cuda*'
wait
note "tests + synth done ($((SECONDS-t0)) s)"
timeout 120 $T --gtest_also_run_disabled_tests --gtest_filter='CudaAttentionDecode8.DISABLED_DecodeModesBench' > $OUT/modes-bench.log 2>&1
note "modes bench rc=$? ($((SECONDS-t0)) s)"; grep -E '^(K/V|f16|q8_0|q4_0|turbo)' $OUT/modes-bench.log >> $SUMMARY
pk() {  # pk ROUND TAG KV DEPTH N REPS [ENV...]
  if [ $((SECONDS-t0)) -gt ${LIMIT:-545} ]; then note "skip $2 r$1 (time)"; return; fi
  local r=$1 tag=$2 kv=$3 d=$4 n=$5 reps=$6; shift 6
  env "$@" timeout 100 $P bench -m $L --device cuda -r $reps --json -d $d -p 0 -n $n -ctk ${kv%/*} -ctv ${kv#*/} 2>>$OUT/logs/polykv.err | grep '^{' | sed "s/^{/{\"round\":$r,\"tag\":\"$tag\",/" >> $OUT/polykv.jsonl
  note "$tag r$r ($((SECONDS-t0)) s): $(grep "\"round\":$r,\"tag\":\"$tag\"" $OUT/polykv.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]')"
}
arms() {  # arms ROUND DEPTH N REPS BASE_D8 KV... : new and base of each KV (order by round), then q8_0/q8_0
  local r=$1 d=$2 n=$3 reps=$4 b=$5 kv; shift 5
  for kv in "$@"; do
    local tag=${kv/\//-}-d$d
    if [ $r = 1 ]; then pk $r new-$tag $kv $d $n $reps; pk $r base-$tag $kv $d $n $reps POLYKV_CUDA_ATTN_D8=$b
    else pk $r base-$tag $kv $d $n $reps POLYKV_CUDA_ATTN_D8=$b; pk $r new-$tag $kv $d $n $reps; fi
  done
  pk $r ref-q8_0-q8_0-d$d q8_0/q8_0 $d $n $reps
}
for r in 1 2; do
  arms $r 0 128 3 generic q4_0/q4_0
  arms $r 32768 32 3 pairs turbo3t/turbo3t q4_0/q4_0
  arms $r 131072 32 2 pairs turbo3t/turbo3t
done
tar cJf $OUT/shards.tar.xz -C $OUT $(cd $OUT && ls shard*.log) && rm -f $OUT/shard*.log
note "done ($((SECONDS-t0)) s)"
cuobjdump --dump-resource-usage build-gpu/polykv 2>&1 | grep -E "Function|REG" | paste - - | grep -E "decode_tc_kernel|decode8_kernelILi128ELi4E" > $OUT/regs.txt
