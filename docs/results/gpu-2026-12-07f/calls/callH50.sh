#!/usr/bin/env bash
# NOT RUN in 2026-12-07f: five requests (16:46-17:30 UTC) got no machine, and the session's device time went with them.
# (Written back to its full form for the next session; the trimmed forms tried are in git history.)
# Call H50: sliding-window decode plans that split the window only (Plan::window_splits), against
# POLYKV_CUDA_WINDOW_SPLITS=0 (splits over every key of the context, as before) in the same build. 1. The GPU tests
# that take windows (CudaAttentionSinks: windows of 7 and 128 at depth 5000; CudaAttention.WindowAndSoftcap), the
# CUDA attention tests and the fixture goldens (gemma2, gemma3, gpt-oss), 8 shards, while synth makes gemma-3-4b q4_0 (34
# layers, 29 of them local with a 1024-key window). 2. Decode, 2 rounds interleaved, order reversed in round 2: depths
# 32768 and 8192 (-n 32 -r 3), q8_0/q8_0, q8_0/turbo3t, f16/f16; depth 0 q8_0/turbo3t (-n 64 -r 3). 3. A timeline of
# the new plan at 32768 (q8_0/q8_0, as H49's). 4. Depth 131072 q8_0/turbo3t (-n 32 -r 2), one round, as time allows.
# Carry .gpucarry/build-gpu.tar.xz (rebuilt from main) and .gpucarry/fixtures-win (the windowed models' fixtures:
# gemma2, gemma3, gptoss from ../shared/fixtures/models/random, 24 MB; docs/ and models/*.gguf moved aside).
[ -d .gpucarry/fixtures-win ] && [ ! -d .gpucarry/fixtures ] && mv .gpucarry/fixtures-win .gpucarry/fixtures
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
mkdir -p $OUT/logs $OUT/t
G=/tmp/g3-4b-q4_0.gguf
[ -s $G ] || timeout 300 $P synth --shape gemma-3-4b --type q4_0 -o $G --threads 6 > $OUT/logs/synth-g3.log 2>&1 &
gtest_shards 8 150 'CudaAttention*:*Window*:GptOssCuda.*:DenseGoldenCuda.*:FuseDecCuda.Gemma2*:FuseDecCuda.GptOss*'
wait
note "tests + synth done ($((SECONDS-t0)) s)"
ab() {  # ab ROUND REST KV DEPTH N REPS: new and old (POLYKV_CUDA_WINDOW_SPLITS=0), order by round
  if [ $1 = 1 ]; then
    bench_tagged $1 new-$2 $P $G $3 $4 $5 $6; bench_tagged $1 old-$2 $P $G $3 $4 $5 $6 POLYKV_CUDA_WINDOW_SPLITS=0
  else
    bench_tagged $1 old-$2 $P $G $3 $4 $5 $6 POLYKV_CUDA_WINDOW_SPLITS=0; bench_tagged $1 new-$2 $P $G $3 $4 $5 $6
  fi
}
for r in 1 2; do
  for d in 32768 8192; do
    for kv in q8_0/q8_0 q8_0/turbo3t f16/f16; do ab $r g3-${kv/\//-}-d$d $kv $d 32 3; done
  done
  ab $r g3-q8_0-turbo3t-d0 q8_0/turbo3t 0 64 3
done
if [ $((SECONDS-t0)) -lt ${LIMIT:-540} ]; then
  CUDA_INJECTION64_PATH=$PWD/build-gpu/lib/libpolykv_cuda_trace.so POLYKV_TRACE=/tmp/trace-new.csv timeout 120 \
    $P bench -m $G --device cuda -r 1 -d 32768 -p 0 -n 24 -ctk q8_0 -ctv q8_0 > $OUT/logs/trace-new.log 2>&1
  python3 scripts/cuda_trace_summary.py /tmp/trace-new.csv --skip 4 > $OUT/t/trace-g3-q8_0-q8_0-d32768-new.summary.txt 2>&1
  note "trace new ($((SECONDS-t0)) s): $(grep -E '^period' $OUT/t/trace-g3-q8_0-q8_0-d32768-new.summary.txt)"
fi
LIMIT=450 ab 1 g3-q8_0-turbo3t-d131072 q8_0/turbo3t 131072 32 2
tar cJf $OUT/logs.tar.xz -C $OUT logs t $(cd $OUT && ls shard*.log) && rm -rf $OUT/logs $OUT/t $OUT/shard*.log
note "done ($((SECONDS-t0)) s)"
