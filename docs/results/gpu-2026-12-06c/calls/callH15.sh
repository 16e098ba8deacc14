#!/usr/bin/env bash
# 2026-12-06c call H15 (issue #9): the most downloaded GGUF layout, q4_K_M, side by side with llama.cpp on one file.
# polykv synth --type q4_K_M (quant/weight_mix.h: llama-quantize's Q4_K_M choices, 193 q4_K + 33 q6_K matrices for
# llama-3.1-8b) made here; llama.cpp 3f545bec (the newest upstream source fetch could bring, built here by
# start_llama_build, never committed) and polykv on that file, interleaved run by run, 2 rounds at depth 0, then one
# round at depth 32768. llama-bench -ngl 99 -fa 1 -r 3 (depth: -r 2); polykv bench --device cuda -r 3 (depth: -r 2).
# Before: the KV store's GPU tests (the store kernel lost its rolled forms: the default form's code moved back).
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
LLAMA=/tmp/llama.cpp; start_llama_build $OUT/llama-build.log
mkdir -p $OUT/logs $OUT/traces
M=/tmp/l8-q4_K_M.gguf
timeout 400 $P synth --shape llama-3.1-8b --type q4_K_M -o $M --threads 10 >>$OUT/logs/synth.log 2>&1 &
SYN=$!
timeout 120 $T --gtest_filter='CudaKvStore.*:KvEncodeWarpEmulation*:CudaBackendTest.MeasuresItsCopyBandwidth' --gtest_color=no \
  > $OUT/logs/tests.log 2>&1
note "store tests: rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/logs/tests.log | paste -sd' ')"
wait $SYN; note "synth rc=$? at $((SECONDS-t0)) s: $(tail -1 $OUT/logs/synth.log)"
[ -n "$LLAMA_PID" ] && wait $LLAMA_PID
LB=$LLAMA/build/bin/llama-bench
[ -x $LB ] || { note "llama-bench not built"; tail -30 $OUT/llama-build.log >> $SUMMARY; }
note "llama.cpp ready at $((SECONDS-t0)) s"
ll() {  # ll ROUND TAG ARGS...
  local r=$1 tag=$2; shift 2
  [ -x $LB ] || return
  if [ $((SECONDS-t0)) -gt 560 ]; then note "skip llama $tag r$r (time)"; return; fi
  timeout 90 $LB -m $M -ngl 99 -fa 1 -o jsonl "$@" 2>> $OUT/logs/llama.err | sed "s/^{/{\"round\":$r,\"tag\":\"$tag\",/" >> $OUT/llama.jsonl
  note "llama $tag r$r ($((SECONDS-t0)) s): $(grep "\"round\":$r,\"tag\":\"$tag\"" $OUT/llama.jsonl | grep -oE '"samples_ts": *\[[^]]*\]' | paste -sd' ')"
}
pk() {  # pk ROUND TAG ARGS...
  local r=$1 tag=$2; shift 2
  if [ $((SECONDS-t0)) -gt 560 ]; then note "skip polykv $tag r$r (time)"; return; fi
  timeout 90 $P bench -m $M --device cuda --json --bandwidth 3350 "$@" 2>> $OUT/logs/polykv.err | grep '^{' | sed "s/^{/{\"round\":$r,\"tag\":\"$tag\",/" >> $OUT/polykv.jsonl
  note "polykv $tag r$r ($((SECONDS-t0)) s): $(grep "\"round\":$r,\"tag\":\"$tag\"" $OUT/polykv.jsonl | grep -oE '"(decode|prefill)_tok_s_reps":\[[^]]*\]' | paste -sd' ')"
}
for r in 1 2; do
  ll $r pp512 -r 3 -p 512 -n 0 -ctk f16 -ctv f16
  pk $r pp512 -r 3 -p 512 -n 1 -ctk f16 -ctv f16
  ll $r pp4096 -r 3 -p 4096 -n 0 -ctk f16 -ctv f16
  pk $r pp4096 -r 3 -p 4096 -n 1 -ctk f16 -ctv f16
  ll $r tg-f16 -r 3 -p 0 -n 128 -ctk f16 -ctv f16
  pk $r tg-f16 -r 3 -p 0 -n 128 -ctk f16 -ctv f16
  ll $r tg-q8 -r 3 -p 0 -n 128 -ctk q8_0 -ctv q8_0
  pk $r tg-q8 -r 3 -p 0 -n 128 -ctk q8_0 -ctv q8_0
  pk $r tg-t3t -r 3 -p 0 -n 128 -ctk q8_0 -ctv turbo3t
done
CUDA_INJECTION64_PATH=$PWD/build-gpu/lib/libpolykv_cuda_trace.so POLYKV_TRACE=/tmp/trace-q4km.csv \
  timeout 60 $P bench -m $M --device cuda -ctk f16 -ctv f16 -d 0 -p 0 -n 32 -r 1 --bandwidth 3350 >/dev/null 2>>$OUT/logs/polykv.err
python3 scripts/cuda_trace_summary.py /tmp/trace-q4km.csv --skip 4 > $OUT/traces/trace-d0-q4km-f16.summary.txt 2>&1
note "trace: $(grep -E '^period' $OUT/traces/trace-d0-q4km-f16.summary.txt)"
ll 1 tg-f16-d32k -r 2 -p 0 -n 32 -d 32768 -ctk f16 -ctv f16
pk 1 tg-f16-d32k -r 2 -p 0 -n 32 -d 32768 -ctk f16 -ctv f16
ll 1 tg-q8-d32k -r 2 -p 0 -n 32 -d 32768 -ctk q8_0 -ctv q8_0
pk 1 tg-q8-d32k -r 2 -p 0 -n 32 -d 32768 -ctk q8_0 -ctv q8_0
pk 1 tg-t3t-d32k -r 2 -p 0 -n 32 -d 32768 -ctk q8_0 -ctv turbo3t
cd $OUT && cp llama-build.log logs/ 2>/dev/null; tar cJf h15-logs.tar.xz logs traces && rm -rf logs traces llama-build.log
note "done at $((SECONDS-t0)) s"
