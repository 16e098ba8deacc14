#!/usr/bin/env bash
# Call H55 (2026-12-08): H53 and H54 of 2026-12-07h in one call. 1. upstream llama.cpp 3f545bec (the ngxson/llama.cpp
# mirror, carried as .gpucarry/llama-src.tar.xz, never committed) builds for sm_90 in the background while synth makes
# the gemma-3-4b / llama-3.2-1b q4_0 files and 8 test shards run every *Cuda* GPU test H52 did not (models/ carried
# without the draft model: the carry limit; its SpecCuda cases fail for that reason only). 2. side by side at depth
# 32768 (llama-bench -ngl 99 -fa 1 against polykv bench, -n 64 -r 2 both, run by run): f16/f16, q8_0/q8_0, and
# polykv's q8_0/turbo3t; gemma-3-4b (head size 256), llama-3.2-1b (head size 64), gemma again.
# Carry .gpucarry/build-gpu.tar.xz and .gpucarry/llama-src.tar.xz (docs/ and src/ moved aside).
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
mkdir -p $OUT/logs
LLAMA=/tmp/llama.cpp; start_llama_build $OUT/logs/llama-build.log
G=/tmp/g3-4b-q4_0.gguf S=/tmp/l1b-q4_0.gguf
[ -s $G ] || timeout 300 $P synth --shape gemma-3-4b --type q4_0 -o $G --threads 2 > $OUT/logs/synth-g3.log 2>&1 &
[ -s $S ] || timeout 300 $P synth --shape llama-3.2-1b --type q4_0 -o $S --threads 2 > $OUT/logs/synth-l1b.log 2>&1 &
gtest_shards 8 170 '*Cuda*:-CudaAttention*:*Window*:GptOssCuda.*:DenseGoldenCuda.*:FuseDecCuda.Gemma2*:FuseDecCuda.GptOss*'
wait
note "tests + llama.cpp build + synth done ($((SECONDS-t0)) s)"
tar cJf $OUT/shards.tar.xz -C $OUT $(cd $OUT && ls shard*.log) && rm -f $OUT/shard*.log
LB=$LLAMA/build/bin/llama-bench
if [ -x $LB ]; then
  (cd $LLAMA && note "llama.cpp: $(cat COMMIT 2>/dev/null || echo 3f545bec)")
  lb() {  # lb ROUND TAG MODEL K V
    if [ $((SECONDS-t0)) -gt 560 ]; then note "skip llama $2 r$1 (time)"; return; fi
    timeout 100 $LB -m $3 -ngl 99 -fa 1 -r 2 -o jsonl -p 0 -n 64 -d 32768 -ctk $4 -ctv $5 2>> $OUT/logs/llama.err |
      sed "s/^{/{\"round\":$1,\"tag\":\"$2\",/" >> $OUT/llama.jsonl
    note "llama $2 r$1 ($((SECONDS-t0)) s): $(grep "\"round\":$1,\"tag\":\"$2\"" $OUT/llama.jsonl | grep -oE '"samples_ts": *\[[^]]*\]')"
  }
  side() {  # side ROUND NAME MODEL
    lb $1 $2-f16-f16-d32768 $3 f16 f16
    LIMIT=560 bench_tagged $1 pk-$2-f16-f16-d32768 $P $3 f16/f16 32768 64 2
    lb $1 $2-q8_0-q8_0-d32768 $3 q8_0 q8_0
    LIMIT=560 bench_tagged $1 pk-$2-q8_0-q8_0-d32768 $P $3 q8_0/q8_0 32768 64 2
    LIMIT=560 bench_tagged $1 pk-$2-q8_0-turbo3t-d32768 $P $3 q8_0/turbo3t 32768 64 2
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
