#!/usr/bin/env bash
# 2026-12-04f call X1: polykv against a newer llama.cpp on the H200, side by side (issue #9). llama.cpp: the
# ngxson/llama.cpp mirror of upstream master at 3f545bec (2026-08-22; upstream's own snapshot, 1.47 GB, is over
# fetch's 500 MB limit), carried as .gpucarry/llama-src.tar.xz and built here for sm_90 (GGML_NATIVE, Release).
# Synth llama-3.1-8b q4_0. Decode at depth 0 (-n 128 -r 3) and prefill pp512 / pp4096 (-r 3), the engines interleaved
# in each of 3 rounds; llama.cpp with flash attention on (-fa 1), pp4096 also with -ub 4096 (its best ubatch there).
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS; M=/tmp/llama-3.1-8b-q4_0.gguf
LLAMA=/tmp/llama.cpp; start_llama_build $OUT/llama-build.log
$P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 8 > /dev/null 2>&1
note "synth done at $((SECONDS-t0)) s"
[ -n "$LLAMA_PID" ] && wait $LLAMA_PID
LB=$LLAMA/build/bin/llama-bench
[ -x $LB ] || { note "llama-bench not built"; tail -20 $OUT/llama-build.log >> $SUMMARY; exit 1; }
note "llama.cpp built at $((SECONDS-t0)) s: $(grep -m1 -oE 'build: [^ ]+ \([0-9]+\)' $OUT/llama-build.log)"
mkdir -p $OUT/logs
ll() {  # ll ROUND TAG ARGS...
  local r=$1 tag=$2; shift 2
  timeout 120 $LB -m $M -ngl 99 -fa 1 -r 3 -o jsonl "$@" 2>> $OUT/logs/llama.err | sed "s/^{/{\"round\":$r,\"tag\":\"$tag\",/" >> $OUT/llama.jsonl
  note "llama $tag r$r: $(grep "\"round\":$r,\"tag\":\"$tag\"" $OUT/llama.jsonl | grep -oE '"samples_ts": *\[[^]]*\]' | paste -sd' ')"
}
pk() {  # pk ROUND TAG ARGS...
  local r=$1 tag=$2; shift 2
  timeout 120 $P bench -m $M --device cuda -r 3 --json --bandwidth 4240 "$@" 2>> $OUT/logs/polykv.err | grep '^{' | sed "s/^{/{\"round\":$r,\"tag\":\"$tag\",/" >> $OUT/polykv.jsonl
  note "polykv $tag r$r: $(grep "\"round\":$r,\"tag\":\"$tag\"" $OUT/polykv.jsonl | grep -oE '"(decode|prefill)_tok_s_reps":\[[^]]*\]' | paste -sd' ')"
}
for r in 1 2 3; do
  ll $r tg-f16 -p 0 -n 128 -ctk f16 -ctv f16
  pk $r tg-f16 -p 0 -n 128 -ctk f16 -ctv f16
  ll $r tg-q8 -p 0 -n 128 -ctk q8_0 -ctv q8_0
  pk $r tg-q8 -p 0 -n 128 -ctk q8_0 -ctv q8_0
  pk $r tg-t3t -p 0 -n 128 -ctk q8_0 -ctv turbo3t
  ll $r pp512 -p 512 -n 0 -ctk f16 -ctv f16
  pk $r pp512 -p 512 -n 0
  ll $r pp4096 -p 4096 -n 0 -ctk f16 -ctv f16
  ll $r pp4096-ub4096 -p 4096 -n 0 -b 4096 -ub 4096 -ctk f16 -ctv f16
  pk $r pp4096 -p 4096 -n 0
  note "round $r done at $((SECONDS-t0)) s"
done
cd $OUT && tar cJf x1-logs.tar.xz logs llama-build.log && rm -rf logs llama-build.log
