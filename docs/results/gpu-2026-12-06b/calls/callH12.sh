#!/usr/bin/env bash
# 2026-12-06b call H12 (issue #9). Build: main with the weight loads' L2 policy (POLYKV_CUDA_W_EVICT=first|normal,
# default normal here); models/ and tests/data carried (H11's test run lost tests/data and aborted).
# (0) every GPU test ('*Cuda*:*GPU*', 4 shards), among them the new MatvecSplitCuda.EvictFirstLoadsSameBits;
# (1) decode A/B, weights evict-first vs normal, synth llama-3.1-8b, depth 0, bench -p 0 -n 128 -r 3, 2 rounds,
#     arms interleaved (order swapped in round 2): q4_0 f16/f16, q4_0 q8_0/turbo3t, q4_K f16/f16;
#     depth 32768 q4_0 q8_0/turbo3t (-n 32 -r 2, one round);
# (2) in-graph timelines of both arms (q4_0, q8_0/turbo3t, depth 0): which kernels move.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
mkdir -p $OUT/logs $OUT/traces
SYN=()
for ty in q4_0 q4_K; do
  timeout 300 $P synth --shape llama-3.1-8b --type $ty -o /tmp/l8-$ty.gguf --threads 6 >>$OUT/logs/synth.log 2>&1 &
  SYN+=($!)
done
gtest_shards 4 280 '*Cuda*:*GPU*:-*DISABLED*'
wait "${SYN[@]}"
note "synth done at $((SECONDS-t0)) s: $(ls -la /tmp/l8-*.gguf | awk '{print $5}' | paste -sd' ')"
ab() {  # ab ARM ROUND TYPE CTK CTV DEPTH N REPS
  local arm=$1 r=$2 ty=$3 k=$4 v=$5 d=$6 n=$7 reps=$8
  if [ $((SECONDS-t0)) -gt 540 ]; then note "skip $arm $ty $k/$v d$d r$r (time)"; return; fi
  POLYKV_CUDA_W_EVICT=$arm timeout 90 $P bench -m /tmp/l8-$ty.gguf --device cuda -ctk $k -ctv $v -d $d -p 0 -n $n -r $reps \
    --bandwidth 3350 --json 2>>$OUT/logs/bench.err | grep '^{' |
    sed "s/^{/{\"arm\":\"$arm\",\"round\":$r,\"wtype\":\"$ty\",/" >>$OUT/ab.jsonl
  note "$ty $k/$v d$d $arm r$r ($((SECONDS-t0)) s): $(tail -1 $OUT/ab.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]' | tr -d '"')"
}
for r in 1 2; do
  arms="normal first"; [ $r = 2 ] && arms="first normal"
  for cfg in "q4_0 f16 f16" "q4_0 q8_0 turbo3t" "q4_K f16 f16"; do
    for arm in $arms; do ab $arm $r $cfg 0 128 3; done
  done
done
for arm in normal first; do ab $arm 1 q4_0 q8_0 turbo3t 32768 32 2; done
for arm in normal first; do
  if [ $((SECONDS-t0)) -gt 560 ]; then note "skip trace $arm (time)"; continue; fi
  CUDA_INJECTION64_PATH=$PWD/build-gpu/lib/libpolykv_cuda_trace.so POLYKV_TRACE=/tmp/trace-$arm.csv POLYKV_CUDA_W_EVICT=$arm \
    timeout 60 $P bench -m /tmp/l8-q4_0.gguf --device cuda -ctk q8_0 -ctv turbo3t -d 0 -p 0 -n 32 -r 1 --bandwidth 3350 \
    >/dev/null 2>>$OUT/logs/bench.err
  python3 scripts/cuda_trace_summary.py /tmp/trace-$arm.csv --skip 4 > $OUT/traces/trace-d0-$arm.summary.txt 2>&1
  note "trace $arm: $(grep -iE 'period|token' $OUT/traces/trace-d0-$arm.summary.txt | head -2 | paste -sd' ')"
done
cd $OUT && tar cJf h12-logs.tar.xz logs shard*.log traces && rm -rf logs shard*.log traces
note "done at $((SECONDS-t0)) s"
