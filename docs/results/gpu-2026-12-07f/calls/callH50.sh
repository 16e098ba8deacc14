#!/usr/bin/env bash
# NOT RUN: five requests (16:46-17:30 UTC) got no machine, and the session's device time went with them.
# Call H50 (2026-12-07f): sliding-window decode plans that split the window only (Plan::window_splits), against
# POLYKV_CUDA_WINDOW_SPLITS=0 (splits over every key of the context, as before) in the same build. 1. The CUDA
# attention GPU tests (windows of 7 and 128 at depth 5000 among them: CudaAttentionSinks) and the fixture goldens
# (gemma3, gpt-oss), 8 shards, while synth makes gemma-3-4b q4_0 (34 layers, 29 of them local with a 1024-key window).
# 2. Decode, 2 rounds interleaved, order reversed in round 2: depths 8192 and 32768 (-n 32 -r 3), f16/f16, q8_0/q8_0,
# q8_0/turbo3t. 3. A timeline of the new plan at 32768 (q8_0/q8_0, as H49's).
# (Trimmed after five failed starts left 319 s of device time: the windowed GPU tests and goldens only, q8_0/q8_0 and
# q8_0/turbo3t at 32768 only.)
# Carry .gpucarry/build-gpu.tar.xz and .gpucarry/fixtures (docs/ and models/*.gguf moved aside).
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
mkdir -p $OUT/logs $OUT/t
G=/tmp/g3-4b-q4_0.gguf
[ -s $G ] || timeout 300 $P synth --shape gemma-3-4b --type q4_0 -o $G --threads 6 > $OUT/logs/synth-g3.log 2>&1 &
gtest_shards 8 60 'CudaAttentionSinks.*:CudaAttention.WindowAndSoftcap:*Window*:GptOssCuda.*:DenseGoldenCuda.*'
wait
note "tests + synth done ($((SECONDS-t0)) s)"
pk() {  # pk ROUND TAG KV DEPTH N [ENV...]
  if [ $((SECONDS-t0)) -gt ${LIMIT:-170} ]; then note "skip $2 r$1 (time)"; return; fi
  local r=$1 tag=$2 kv=$3 d=$4 n=$5; shift 5
  env "$@" timeout 120 $P bench -m $G --device cuda -r 3 --json -d $d -p 0 -n $n -ctk ${kv%/*} -ctv ${kv#*/} 2>>$OUT/logs/polykv.err | grep '^{' | sed "s/^{/{\"round\":$r,\"tag\":\"$tag\",/" >> $OUT/polykv.jsonl
  note "$tag r$r ($((SECONDS-t0)) s): $(grep "\"round\":$r,\"tag\":\"$tag\"" $OUT/polykv.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]')"
}
ab() {  # ab ROUND REST KV DEPTH N
  if [ $1 = 1 ]; then pk $1 new-$2 $3 $4 $5; pk $1 old-$2 $3 $4 $5 POLYKV_CUDA_WINDOW_SPLITS=0
  else pk $1 old-$2 $3 $4 $5 POLYKV_CUDA_WINDOW_SPLITS=0; pk $1 new-$2 $3 $4 $5; fi
}
for r in 1 2; do
  for kv in q8_0/q8_0 q8_0/turbo3t; do ab $r g3-${kv/\//-}-d32768 $kv 32768 32; done

done
if [ $((SECONDS-t0)) -lt ${LIMIT:-170} ]; then
  CUDA_INJECTION64_PATH=$PWD/build-gpu/lib/libpolykv_cuda_trace.so POLYKV_TRACE=/tmp/trace-new.csv timeout 120 \
    $P bench -m $G --device cuda -r 1 -d 32768 -p 0 -n 24 -ctk q8_0 -ctv q8_0 > $OUT/logs/trace-new.log 2>&1
  python3 scripts/cuda_trace_summary.py /tmp/trace-new.csv --skip 4 > $OUT/t/trace-g3-q8_0-q8_0-d32768-new.summary.txt 2>&1
  note "trace new ($((SECONDS-t0)) s): $(grep -E '^period' $OUT/t/trace-g3-q8_0-q8_0-d32768-new.summary.txt)"
fi
tar cJf $OUT/logs.tar.xz -C $OUT logs t $(cd $OUT && ls shard*.log) && rm -rf $OUT/logs $OUT/t $OUT/shard*.log
note "done ($((SECONDS-t0)) s)"
