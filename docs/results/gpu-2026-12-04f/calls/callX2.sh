#!/usr/bin/env bash
# 2026-12-04f call X2: decode at depth 32768 (2 interleaved rounds) and 131072 (one round), polykv against llama.cpp
# 3f545bec (X1's build, kept on the warm machine, else rebuilt), synth llama-3.1-8b q4_0, -n 64 -r 2 each run;
# llama.cpp -fa 1 with f16 and q8_0 KV; polykv f16/f16, q8_0/q8_0 and q8_0/turbo3t.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS; M=/tmp/llama-3.1-8b-q4_0.gguf
LLAMA=/tmp/llama.cpp; start_llama_build $OUT/llama-build.log
[ -s $M ] || $P synth --shape llama-3.1-8b --type q4_0 -o $M --threads 8 > /dev/null 2>&1
[ -n "$LLAMA_PID" ] && wait $LLAMA_PID
LB=$LLAMA/build/bin/llama-bench
[ -x $LB ] || { note "llama-bench not built"; exit 1; }
note "ready at $((SECONDS-t0)) s"
mkdir -p $OUT/logs
ll() {  # ll ROUND TAG ARGS...
  local r=$1 tag=$2; shift 2
  timeout 200 $LB -m $M -ngl 99 -fa 1 -r 2 -o jsonl "$@" 2>> $OUT/logs/llama.err | sed "s/^{/{\"round\":$r,\"tag\":\"$tag\",/" >> $OUT/llama.jsonl
  note "llama $tag r$r ($((SECONDS-t0)) s): $(grep "\"round\":$r,\"tag\":\"$tag\"" $OUT/llama.jsonl | grep -oE '"samples_ts": *\[[^]]*\]' | paste -sd' ')"
}
pk() {  # pk ROUND TAG ARGS...
  local r=$1 tag=$2; shift 2
  timeout 200 $P bench -m $M --device cuda -r 2 --json --bandwidth 4240 "$@" 2>> $OUT/logs/polykv.err | grep '^{' | sed "s/^{/{\"round\":$r,\"tag\":\"$tag\",/" >> $OUT/polykv.jsonl
  note "polykv $tag r$r ($((SECONDS-t0)) s): $(grep "\"round\":$r,\"tag\":\"$tag\"" $OUT/polykv.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]' | paste -sd' ')"
}
for r in 1 2; do
  ll $r d32k-f16 -p 0 -n 64 -d 32768 -ctk f16 -ctv f16
  pk $r d32k-f16 -p 0 -n 64 -d 32768 -ctk f16 -ctv f16
  ll $r d32k-q8 -p 0 -n 64 -d 32768 -ctk q8_0 -ctv q8_0
  pk $r d32k-q8 -p 0 -n 64 -d 32768 -ctk q8_0 -ctv q8_0
  pk $r d32k-t3t -p 0 -n 64 -d 32768 -ctk q8_0 -ctv turbo3t
done
ll 1 d128k-f16 -p 0 -n 64 -d 131072 -ctk f16 -ctv f16
pk 1 d128k-f16 -p 0 -n 64 -d 131072 -ctk f16 -ctv f16
pk 1 d128k-t3t -p 0 -n 64 -d 131072 -ctk q8_0 -ctv turbo3t
pk 1 d128k-q8 -p 0 -n 64 -d 131072 -ctk q8_0 -ctv q8_0
ll 1 d128k-q8 -p 0 -n 64 -d 131072 -ctk q8_0 -ctv q8_0
note "done at $((SECONDS-t0)) s"
cd $OUT && tar cJf x2-logs.tar.xz logs && rm -rf logs
