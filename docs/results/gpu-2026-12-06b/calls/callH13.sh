#!/usr/bin/env bash
# 2026-12-06b call H13 (issue #9): polykv (main e76c764's sources, as in H11) side by side with llama.cpp 3f545bec
# (the newest upstream source fetch could bring: the ngxson/llama.cpp mirror; built here by start_llama_build,
# GGML_CUDA sm_90, never committed) on the lent card and the same synth llama-3.1-8b files (made here).
# llama-bench -ngl 99 -fa 1 -r 3; polykv bench --device cuda -r 3. Interleaved run by run: pp512, pp4096 (f16 KV),
# decode at depth 0 (-n 128, f16/f16; polykv also q8_0/turbo3t). q4_0 and q4_K 2 rounds, then q8_0 while time allows.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
LLAMA=/tmp/llama.cpp; start_llama_build $OUT/llama-build.log
mkdir -p $OUT/logs
SYN=()
for ty in q4_0 q4_K q8_0; do
  timeout 300 $P synth --shape llama-3.1-8b --type $ty -o /tmp/l8-$ty.gguf --threads 3 >>$OUT/logs/synth.log 2>&1 &
  SYN+=($!)
done
wait "${SYN[@]}" 2>/dev/null
note "synth done at $((SECONDS-t0)) s"
[ -n "$LLAMA_PID" ] && wait $LLAMA_PID
LB=$LLAMA/build/bin/llama-bench
[ -x $LB ] || { note "llama-bench not built"; tail -30 $OUT/llama-build.log >> $SUMMARY; exit 1; }
note "llama.cpp ready at $((SECONDS-t0)) s"
ll() {  # ll ROUND TAG ARGS...
  local r=$1 tag=$2; shift 2
  if [ $((SECONDS-t0)) -gt 550 ]; then note "skip llama $tag r$r (time)"; return; fi
  timeout 60 $LB -m $M -ngl 99 -fa 1 -r 3 -o jsonl "$@" 2>> $OUT/logs/llama.err | sed "s/^{/{\"round\":$r,\"tag\":\"$tag\",/" >> $OUT/llama.jsonl
  note "llama $tag r$r ($((SECONDS-t0)) s): $(grep "\"round\":$r,\"tag\":\"$tag\"" $OUT/llama.jsonl | grep -oE '"samples_ts": *\[[^]]*\]' | paste -sd' ')"
}
pk() {  # pk ROUND TAG ARGS...
  local r=$1 tag=$2; shift 2
  if [ $((SECONDS-t0)) -gt 550 ]; then note "skip polykv $tag r$r (time)"; return; fi
  timeout 60 $P bench -m $M --device cuda -r 3 --json --bandwidth 3350 "$@" 2>> $OUT/logs/polykv.err | grep '^{' | sed "s/^{/{\"round\":$r,\"tag\":\"$tag\",/" >> $OUT/polykv.jsonl
  note "polykv $tag r$r ($((SECONDS-t0)) s): $(grep "\"round\":$r,\"tag\":\"$tag\"" $OUT/polykv.jsonl | grep -oE '"(decode|prefill)_tok_s_reps":\[[^]]*\]' | paste -sd' ')"
}
one() {  # one ROUND TYPE
  local r=$1 ty=$2
  M=/tmp/l8-$ty.gguf
  ll $r $ty-pp512 -p 512 -n 0 -ctk f16 -ctv f16
  pk $r $ty-pp512 -p 512 -n 1 -ctk f16 -ctv f16
  ll $r $ty-pp4096 -p 4096 -n 0 -ctk f16 -ctv f16
  pk $r $ty-pp4096 -p 4096 -n 1 -ctk f16 -ctv f16
  ll $r $ty-tg-f16 -p 0 -n 128 -ctk f16 -ctv f16
  pk $r $ty-tg-f16 -p 0 -n 128 -ctk f16 -ctv f16
  pk $r $ty-tg-t3t -p 0 -n 128 -ctk q8_0 -ctv turbo3t
}
for r in 1 2; do one $r q4_0; one $r q4_K; done
one 1 q8_0
cd $OUT && cp llama-build.log logs/ 2>/dev/null; tar cJf h13-logs.tar.xz logs && rm -rf logs llama-build.log
note "done at $((SECONDS-t0)) s"
