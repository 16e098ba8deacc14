#!/usr/bin/env bash
# Call H39 (2026-12-07d): (1) H38 of 2026-12-07c: the MoE routing by ranks against the rounds
# (POLYKV_CUDA_MOE_RANK_ROUTE=0) on qwen3.5-35b-a3b (256 experts) with qwen3-30b-a3b as the control, depth 0, f16/f16,
# 2 rounds interleaved (order reversed in round 2). (2) Dense diagnostics on this card for the next kernel work:
# in-graph timelines of synth llama-3.1-8b q4_0 at depth 0 (f16/f16, q8_0/q8_0, q8_0/turbo3t), and decode at depth
# 32768 with f16/f16 (the pairs kernel), q8_0/q8_0, q8_0/turbo3t, and f16/f16 at 131072.
# Carry .gpucarry/build-gpu.tar.xz (a build of main 6bb3bf2) and .gpucarry/fixtures (qwen35moe for the tests).
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
mkdir -p $OUT/logs $OUT/traces
Q=/tmp/q35moe-q4_0.gguf M=/tmp/q3moe-q4_0.gguf L=/tmp/l8b-q4_0.gguf
[ -s $Q ] || timeout 300 $P synth --shape qwen3.5-35b-a3b --type q4_0 -o $Q --threads 6 > $OUT/logs/synth-q35.log 2>&1 &
[ -s $M ] || timeout 300 $P synth --shape qwen3-30b-a3b --type q4_0 -o $M --threads 5 > $OUT/logs/synth-q3.log 2>&1 &
[ -s $L ] || timeout 300 $P synth --shape llama-3.1-8b --type q4_0 -o $L --threads 4 > $OUT/logs/synth-l8b.log 2>&1 &
timeout 120 $T --gtest_filter='MoeCuda.*:*MoeV2Cuda*' --gtest_color=no > $OUT/tests.log 2>&1
note "tests: rc=$? ($((SECONDS-t0)) s) $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' $OUT/tests.log | paste -sd' ')"
wait
note "synth done ($((SECONDS-t0)) s): $(ls -la $Q $M $L | awk '{print $5}' | paste -sd' ')"
pk() {  # pk ROUND TAG MODEL KV DEPTH N [ENV...]
  if [ $((SECONDS-t0)) -gt ${LIMIT:-520} ]; then note "skip $2 r$1 (time)"; return; fi
  local r=$1 tag=$2 m=$3 kv=$4 d=$5 n=$6; shift 6
  env "$@" timeout 100 $P bench -m $m --device cuda -r 3 --json -d $d -p 0 -n $n -ctk ${kv%/*} -ctv ${kv#*/} 2>>$OUT/logs/polykv.err | grep '^{' | sed "s/^{/{\"round\":$r,\"tag\":\"$tag\",/" >> $OUT/polykv.jsonl
  note "$tag r$r ($((SECONDS-t0)) s): $(grep "\"round\":$r,\"tag\":\"$tag\"" $OUT/polykv.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]')"
}
for r in 1 2; do
  for m in $Q $M; do
    b=$(basename $m .gguf)
    if [ $r = 1 ]; then pk $r new-$b $m f16/f16 0 128; pk $r rank0-$b $m f16/f16 0 128 POLYKV_CUDA_MOE_RANK_ROUTE=0
    else pk $r rank0-$b $m f16/f16 0 128 POLYKV_CUDA_MOE_RANK_ROUTE=0; pk $r new-$b $m f16/f16 0 128; fi
  done
done
for kv in f16/f16 q8_0/q8_0 q8_0/turbo3t; do  # timelines of the dense token at depth 0
  [ $((SECONDS-t0)) -lt ${TRACE_LIMIT:-470} ] || break
  tg=${kv/\//-}
  CUDA_INJECTION64_PATH=$PWD/build-gpu/lib/libpolykv_cuda_trace.so POLYKV_TRACE=/tmp/trace.csv \
    timeout 60 $P bench -m $L --device cuda -ctk ${kv%/*} -ctv ${kv#*/} -d 0 -p 0 -n 48 -r 1 >/dev/null 2>>$OUT/logs/polykv.err
  python3 scripts/cuda_trace_summary.py /tmp/trace.csv --skip 8 > $OUT/traces/trace-l8b-d0-$tg.summary.txt 2>&1
  note "trace $kv: $(grep -E '^period' $OUT/traces/trace-l8b-d0-$tg.summary.txt)"
done
pk 1 l8b-d0-f16 $L f16/f16 0 128
pk 1 l8b-d0-q8q8 $L q8_0/q8_0 0 128
pk 1 l8b-d32k-f16 $L f16/f16 32768 32
pk 1 l8b-d128k-f16 $L f16/f16 131072 16
pk 1 l8b-d32k-q8q8 $L q8_0/q8_0 32768 32
pk 1 l8b-d32k-q8t3t $L q8_0/turbo3t 32768 32
note "done ($((SECONDS-t0)) s)"
