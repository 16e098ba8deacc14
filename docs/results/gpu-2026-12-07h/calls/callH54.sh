#!/usr/bin/env bash
# Call H54 (2026-12-07h): side by side with llama.cpp 3f545bec (the newest source fetchable here: the ngxson/llama.cpp
# mirror, carried as .gpucarry/llama-src.tar.xz, never committed; built here for sm_90, llama-bench -ngl 99 -fa 1) at
# depth 32768, on the same synth q4_0 files: gemma-3-4b (head size 256: this session's tensor-core decode kernel; 2
# rounds) and llama-3.2-1b (head size 64: last session's; 1 round). Interleaved run by run: llama.cpp f16/f16, polykv
# f16/f16, llama.cpp q8_0/q8_0, polykv q8_0/q8_0, polykv q8_0/turbo3t; -n 64 -r 2 on both.
# Carry .gpucarry/build-gpu.tar.xz and .gpucarry/llama-src.tar.xz (docs/ and models/*.gguf moved aside).
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
mkdir -p $OUT/logs
LLAMA=/tmp/llama.cpp; start_llama_build $OUT/logs/llama-build.log
G=/tmp/g3-4b-q4_0.gguf S=/tmp/l1b-q4_0.gguf
[ -s $G ] || timeout 300 $P synth --shape gemma-3-4b --type q4_0 -o $G --threads 2 > $OUT/logs/synth-g3.log 2>&1 &
[ -s $S ] || timeout 300 $P synth --shape llama-3.2-1b --type q4_0 -o $S --threads 2 > $OUT/logs/synth-l1b.log 2>&1 &
wait
note "llama.cpp build + synth done ($((SECONDS-t0)) s)"
LB=$LLAMA/build/bin/llama-bench
if [ -x $LB ]; then
  lb() {  # lb ROUND TAG MODEL K V
    if [ $((SECONDS-t0)) -gt 540 ]; then note "skip llama $2 r$1 (time)"; return; fi
    timeout 100 $LB -m $3 -ngl 99 -fa 1 -r 2 -o jsonl -p 0 -n 64 -d 32768 -ctk $4 -ctv $5 2>> $OUT/logs/llama.err |
      sed "s/^{/{\"round\":$1,\"tag\":\"$2\",/" >> $OUT/llama.jsonl
    note "llama $2 r$1 ($((SECONDS-t0)) s): $(grep "\"round\":$1,\"tag\":\"$2\"" $OUT/llama.jsonl | grep -oE '"samples_ts": *\[[^]]*\]')"
  }
  side() {  # side ROUND NAME MODEL
    lb $1 $2-f16-f16-d32768 $3 f16 f16
    LIMIT=540 bench_tagged $1 pk-$2-f16-f16-d32768 $P $3 f16/f16 32768 64 2
    lb $1 $2-q8_0-q8_0-d32768 $3 q8_0 q8_0
    LIMIT=540 bench_tagged $1 pk-$2-q8_0-q8_0-d32768 $P $3 q8_0/q8_0 32768 64 2
    LIMIT=540 bench_tagged $1 pk-$2-q8_0-turbo3t-d32768 $P $3 q8_0/turbo3t 32768 64 2
  }
  side 1 g3 $G
  side 1 l1b $S
  side 2 g3 $G
else
  note "llama-bench not built"; tail -20 $OUT/logs/llama-build.log >> $SUMMARY
fi
tar cJf $OUT/logs.tar.xz -C $OUT logs
rm -rf $OUT/logs
note "done ($((SECONDS-t0)) s)"
