#!/usr/bin/env bash
# 2026-12-06c call H17 (issue #9): q4_K_M side by side with llama.cpp again, now with the two-type q,k,v launch as the
# default (H16). llama.cpp 3f545bec (built here, never committed), the same synth llama-3.1-8b q4_K_M file, interleaved
# run by run, 3 rounds: decode at depth 0 (f16/f16, q8_0/q8_0; polykv also q8_0/turbo3t), pp512. Then q5_K_M (the
# q5_K + q6_K pair): POLYKV_CUDA_ROPE2=0 against the default, 2 rounds, f16/f16 at depth 0.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
LLAMA=/tmp/llama.cpp; start_llama_build $OUT/llama-build.log
mkdir -p $OUT/logs
M=/tmp/l8-q4_K_M.gguf M5=/tmp/l8-q5_K_M.gguf
timeout 400 $P synth --shape llama-3.1-8b --type q4_K_M -o $M --threads 6 >>$OUT/logs/synth.log 2>&1 &
S1=$!
timeout 400 $P synth --shape llama-3.1-8b --type q5_K_M -o $M5 --threads 6 >>$OUT/logs/synth.log 2>&1 &
S2=$!
timeout 120 $T --gtest_filter='FuseDecCuda.*:DeferredNormCuda.QkvRope*' --gtest_color=no > $OUT/logs/tests.log 2>&1
note "tests: rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' $OUT/logs/tests.log | paste -sd' ')"
wait $S1 $S2; note "synth done at $((SECONDS-t0)) s: $(tail -2 $OUT/logs/synth.log | paste -sd' ')"
[ -n "$LLAMA_PID" ] && wait $LLAMA_PID
LB=$LLAMA/build/bin/llama-bench
[ -x $LB ] || { note "llama-bench not built"; tail -30 $OUT/llama-build.log >> $SUMMARY; }
note "llama.cpp ready at $((SECONDS-t0)) s"
ll() {  # ll ROUND TAG ARGS...
  local r=$1 tag=$2; shift 2
  [ -x $LB ] || return
  if [ $((SECONDS-t0)) -gt 560 ]; then note "skip llama $tag r$r (time)"; return; fi
  timeout 90 $LB -m $M -ngl 99 -fa 1 -r 3 -o jsonl "$@" 2>> $OUT/logs/llama.err | sed "s/^{/{\"round\":$r,\"tag\":\"$tag\",/" >> $OUT/llama.jsonl
  note "llama $tag r$r ($((SECONDS-t0)) s): $(grep "\"round\":$r,\"tag\":\"$tag\"" $OUT/llama.jsonl | grep -oE '"samples_ts": *\[[^]]*\]' | paste -sd' ')"
}
pk() {  # pk ROUND TAG MODEL ARGS...
  local r=$1 tag=$2 m=$3; shift 3
  if [ $((SECONDS-t0)) -gt 560 ]; then note "skip polykv $tag r$r (time)"; return; fi
  timeout 90 $P bench -m $m --device cuda -r 3 --json --bandwidth 3350 "$@" 2>> $OUT/logs/polykv.err | grep '^{' | sed "s/^{/{\"round\":$r,\"tag\":\"$tag\",/" >> $OUT/polykv.jsonl
  note "polykv $tag r$r ($((SECONDS-t0)) s): $(grep "\"round\":$r,\"tag\":\"$tag\"" $OUT/polykv.jsonl | grep -oE '"(decode|prefill)_tok_s_reps":\[[^]]*\]' | paste -sd' ')"
}
for r in 1 2 3; do
  ll $r tg-f16 -p 0 -n 128 -ctk f16 -ctv f16
  pk $r tg-f16 $M -p 0 -n 128 -ctk f16 -ctv f16
  ll $r tg-q8 -p 0 -n 128 -ctk q8_0 -ctv q8_0
  pk $r tg-q8 $M -p 0 -n 128 -ctk q8_0 -ctv q8_0
  pk $r tg-t3t $M -p 0 -n 128 -ctk q8_0 -ctv turbo3t
  ll $r pp512 -p 512 -n 0 -ctk f16 -ctv f16
  pk $r pp512 $M -p 512 -n 1 -ctk f16 -ctv f16
done
for r in 1 2; do
  POLYKV_CUDA_ROPE2=0 pk $r q5km-rope2-0 $M5 -p 0 -n 128 -ctk f16 -ctv f16
  pk $r q5km-default $M5 -p 0 -n 128 -ctk f16 -ctv f16
done
cd $OUT && cp llama-build.log logs/ 2>/dev/null; tar cJf h17-logs.tar.xz logs && rm -rf logs llama-build.log
note "done at $((SECONDS-t0)) s"
