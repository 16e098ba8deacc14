#!/usr/bin/env bash
# Call H50 (2026-12-07g): two A/B runs in one build (both switches are environment variables of the same binary).
# (a) Sliding-window decode plans that split the window only (Plan::window_splits, 1b8b720) against
#     POLYKV_CUDA_WINDOW_SPLITS=0 (splits over every key of the context, as before): gemma-3-4b q4_0 (34 layers, 29 local
#     with a 1024-key window), depths 32768 and 8192, q8_0/q8_0 and q8_0/turbo3t.
# (b) The tensor-core decode kernel at head size 64 (decode_tc_kernel<..., 64>) against POLYKV_CUDA_ATTN_D8=pairs (at
#     head size 64 exactly the kernels before it: the generic lanes8 kernel): llama-3.2-1b q4_0, depths 8192 and 32768,
#     q8_0/q8_0 and q8_0/turbo3t; 131072 for q8_0/turbo3t, one round.
# 1. GPU tests (8 shards) while synth makes both models: windows (CudaAttentionSinks, WindowAndSoftcap,
#    WindowedDecodeAtDepth), every CUDA attention test incl. CudaAttentionDecode8.TcPairsHeadSize64, the windowed
#    fixture goldens (gemma2, gemma3, gpt-oss). 2. The A/B runs, 2 rounds interleaved, order reversed in round 2
#    (-n 32 -r 3). 3. Timelines of both new plans at 32768 (q8_0/q8_0, as H49's). 4. The kernel bench
#    (DISABLED_DecodeModesBench: one layer at head sizes 128 and 64, modes pairs / mma). Trimmed to ~450 s after four
#    failed starts had left 974 s of the session's device time. QUICK=1 (call H50q, ~280 s): depth 32768 only, the
#    decode / window / sinks attention tests and the goldens, the kernel bench only before 180 s.
# Carry .gpucarry/build-gpu.tar.xz and .gpucarry/fixtures-win (gemma2, gemma3, gptoss of
# ../shared/fixtures/models/random under models/random, 24 MB; docs/ and models/*.gguf moved aside).
[ -d .gpucarry/fixtures-win ] && [ ! -d .gpucarry/fixtures ] && mv .gpucarry/fixtures-win .gpucarry/fixtures
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS LIMIT=400 DEPTHS="32768 8192"
[ -n "${QUICK:-}" ] && LIMIT=250 DEPTHS=32768
mkdir -p $OUT/logs $OUT/t
G=/tmp/g3-4b-q4_0.gguf S=/tmp/l1b-q4_0.gguf
[ -s $G ] || timeout 300 $P synth --shape gemma-3-4b --type q4_0 -o $G --threads 8 > $OUT/logs/synth-g3.log 2>&1 &
[ -s $S ] || timeout 300 $P synth --shape llama-3.2-1b --type q4_0 -o $S --threads 4 > $OUT/logs/synth-l1b.log 2>&1 &
if [ -n "${QUICK:-}" ]; then
  gtest_shards 8 120 'CudaAttentionDecode8.*:CudaAttention.Window*:CudaAttentionSinks*:CudaAttention.Decode*:GptOssCuda.*:DenseGoldenCuda.*'
else
  gtest_shards 8 170 'CudaAttention*:*Window*:GptOssCuda.*:DenseGoldenCuda.*:FuseDecCuda.Gemma2*:FuseDecCuda.GptOss*'
fi
wait
note "tests + synth done ($((SECONDS-t0)) s)"
ab() {  # ab ROUND MODEL TAGREST KV DEPTH N REPS ENV_OLD: new and old (ENV_OLD), order by round
  if [ $1 = 1 ]; then
    bench_tagged $1 new-$3 $P $2 $4 $5 $6 $7; bench_tagged $1 old-$3 $P $2 $4 $5 $6 $7 $8
  else
    bench_tagged $1 old-$3 $P $2 $4 $5 $6 $7 $8; bench_tagged $1 new-$3 $P $2 $4 $5 $6 $7
  fi
}
for r in 1 2; do
  for d in $DEPTHS; do
    for kv in q8_0/q8_0 q8_0/turbo3t; do ab $r $G g3-${kv/\//-}-d$d $kv $d 32 3 POLYKV_CUDA_WINDOW_SPLITS=0; done
    for kv in q8_0/q8_0 q8_0/turbo3t; do ab $r $S l1b-${kv/\//-}-d$d $kv $d 32 3 POLYKV_CUDA_ATTN_D8=pairs; done
  done
done
tr() {  # tr TAG MODEL KV DEPTH
  if [ $((SECONDS-t0)) -gt $LIMIT ]; then note "skip trace $1 (time)"; return; fi
  CUDA_INJECTION64_PATH=$PWD/build-gpu/lib/libpolykv_cuda_trace.so POLYKV_TRACE=/tmp/trace-$1.csv timeout 120 \
    $P bench -m $2 --device cuda -r 1 -d $4 -p 0 -n 24 -ctk ${3%/*} -ctv ${3#*/} > $OUT/logs/trace-$1.log 2>&1
  python3 scripts/cuda_trace_summary.py /tmp/trace-$1.csv --skip 4 > $OUT/t/trace-$1.summary.txt 2>&1
  note "trace $1 ($((SECONDS-t0)) s): $(grep -E "^period" $OUT/t/trace-$1.summary.txt)"
}
tr g3-q8_0-q8_0-d32768-new $G q8_0/q8_0 32768
tr l1b-q8_0-q8_0-d32768-new $S q8_0/q8_0 32768
if [ $((SECONDS-t0)) -lt $((LIMIT - 70)) ]; then
  timeout 90 $T --gtest_also_run_disabled_tests --gtest_filter='CudaAttentionDecode8.DISABLED_DecodeModesBench' \
    > $OUT/t/decode-modes-bench.txt 2>&1
  note "kernel bench done ($((SECONDS-t0)) s)"
fi
LIMIT=$((LIMIT + 20)) ab 1 $S l1b-q8_0-turbo3t-d131072 q8_0/turbo3t 131072 32 2 POLYKV_CUDA_ATTN_D8=pairs
tar cJf $OUT/logs.tar.xz -C $OUT logs t $(cd $OUT && ls shard*.log) && rm -rf $OUT/logs $OUT/t $OUT/shard*.log
note "done ($((SECONDS-t0)) s)"
