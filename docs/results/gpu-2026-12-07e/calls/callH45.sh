#!/usr/bin/env bash
# Call H45 (2026-12-07e): turbo K on the tensor-core decode kernel (turbo3t/turbo3t past one split).
# 1. Every *Cuda* test in 8 shards (the final build of 2026-12-07d, never run on a GPU, plus this change), while
#    synth makes llama-3.1-8b q4_0. 2. CudaAttentionDecode8.DISABLED_DecodeModesBench (one layer: pairs vs mma,
#    every timed pair, 4096 / 32768 / 131072 keys). 3. Decode, turbo3t/turbo3t new against POLYKV_CUDA_ATTN_D8=pairs
#    (the kernel before), q8_0/q8_0 beside them (the "never slower" reference), depth 32768 (-n 32 -r 3) and 131072
#    (-n 32 -r 2), 2 rounds interleaved, order reversed in round 2; q4_0/q4_0 at 32768 once (what it costs there).
# Carry .gpucarry/build-gpu.tar.xz and models/*.gguf.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
mkdir -p $OUT/logs
L=/tmp/l8b-q4_0.gguf
[ -s $L ] || timeout 300 $P synth --shape llama-3.1-8b --type q4_0 -o $L --threads 6 > $OUT/logs/synth-l8b.log 2>&1 &
gtest_shards 8 200 '*Cuda*'
wait
note "tests + synth done ($((SECONDS-t0)) s)"
timeout 150 $T --gtest_also_run_disabled_tests --gtest_filter='CudaAttentionDecode8.DISABLED_DecodeModesBench' > $OUT/modes-bench.log 2>&1
note "modes bench rc=$? ($((SECONDS-t0)) s)"; grep -E '^(K/V|f16|q8_0|turbo)' $OUT/modes-bench.log >> $SUMMARY
pk() {  # pk ROUND TAG KV DEPTH N REPS [ENV...]
  if [ $((SECONDS-t0)) -gt ${LIMIT:-540} ]; then note "skip $2 r$1 (time)"; return; fi
  local r=$1 tag=$2 kv=$3 d=$4 n=$5 reps=$6; shift 6
  env "$@" timeout 120 $P bench -m $L --device cuda -r $reps --json -d $d -p 0 -n $n -ctk ${kv%/*} -ctv ${kv#*/} 2>>$OUT/logs/polykv.err | grep '^{' | sed "s/^{/{\"round\":$r,\"tag\":\"$tag\",/" >> $OUT/polykv.jsonl
  note "$tag r$r ($((SECONDS-t0)) s): $(grep "\"round\":$r,\"tag\":\"$tag\"" $OUT/polykv.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]')"
}
for r in 1 2; do
  for d in 32768 131072; do
    reps=3; [ $d = 131072 ] && reps=2
    if [ $r = 1 ]; then
      pk $r new-tt-d$d turbo3t/turbo3t $d 32 $reps
      pk $r base-tt-d$d turbo3t/turbo3t $d 32 $reps POLYKV_CUDA_ATTN_D8=pairs
      pk $r ref-q8-d$d q8_0/q8_0 $d 32 $reps
      [ $d = 32768 ] && pk $r ref-q4-d$d q4_0/q4_0 $d 32 $reps
    else
      pk $r ref-q8-d$d q8_0/q8_0 $d 32 $reps
      pk $r base-tt-d$d turbo3t/turbo3t $d 32 $reps POLYKV_CUDA_ATTN_D8=pairs
      pk $r new-tt-d$d turbo3t/turbo3t $d 32 $reps
    fi
  done
done
tar cJf $OUT/shards.tar.xz -C $OUT $(cd $OUT && ls shard*.log) && rm -f $OUT/shard*.log
note "done ($((SECONDS-t0)) s)"
