#!/usr/bin/env bash
# 2026-12-04f call X3: the same comparison as X1 on synth llama-3.1-8b q4_K and q8_0 (the issue's other weight types), 2 rounds each:
# llama.cpp 3f545bec as in X1 (kept on the warm machine), -fa 1; decode at depth 0 (-n 128 -r 3) and prefill pp512 /
# pp4096 (-r 3), interleaved.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
LLAMA=/tmp/llama.cpp; start_llama_build $OUT/llama-build.log
for ty in q4_K q8_0; do [ -s /tmp/llama-3.1-8b-$ty.gguf ] || $P synth --shape llama-3.1-8b --type $ty -o /tmp/llama-3.1-8b-$ty.gguf --threads 8 > /dev/null 2>&1; done
[ -n "$LLAMA_PID" ] && wait $LLAMA_PID
LB=$LLAMA/build/bin/llama-bench
[ -x $LB ] || { note "llama-bench not built"; exit 1; }
note "ready at $((SECONDS-t0)) s"
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
for ty in q4_K q8_0; do
  M=/tmp/llama-3.1-8b-$ty.gguf
  for r in 1 2; do
    ll $r $ty-tg-f16 -p 0 -n 128 -ctk f16 -ctv f16
    pk $r $ty-tg-f16 -p 0 -n 128 -ctk f16 -ctv f16
    ll $r $ty-tg-q8 -p 0 -n 128 -ctk q8_0 -ctv q8_0
    pk $r $ty-tg-q8 -p 0 -n 128 -ctk q8_0 -ctv q8_0
    pk $r $ty-tg-t3t -p 0 -n 128 -ctk q8_0 -ctv turbo3t
    ll $r $ty-pp512 -p 512 -n 0 -ctk f16 -ctv f16
    pk $r $ty-pp512 -p 512 -n 0
    ll $r $ty-pp4096 -p 4096 -n 0 -ctk f16 -ctv f16
    pk $r $ty-pp4096 -p 4096 -n 0
    note "$ty round $r done at $((SECONDS-t0)) s"
  done
done
cd $OUT && tar cJf x3-logs.tar.xz logs && rm -rf logs
