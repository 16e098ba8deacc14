#!/usr/bin/env bash
# Call H52 (2026-12-07h): three A/B runs in one build (each switch is an environment variable of the same binary).
# (a) The tensor-core decode kernel at head size 256 (decode_tc_kernel<..., 256>) against POLYKV_CUDA_ATTN_D8=pairs
#     (at head size 256 exactly the kernel before it: the slots kernel): gemma-3-4b q4_0 (34 layers of head size 256,
#     5 global, 29 local with a 1024-key window), q8_0/q8_0 and q8_0/turbo3t at depth 32768 (then 8192).
# (b) Sliding-window decode plans that split the window only (Plan::window_splits, 2026-12-07f) against
#     POLYKV_CUDA_WINDOW_SPLITS=0 (splits over every key of the context, as before): the same gemma-3-4b runs.
# (c) The tensor-core decode kernel at head size 64 (2026-12-07g) against POLYKV_CUDA_ATTN_D8=pairs (at head size 64
#     the generic lanes8 kernel): llama-3.2-1b q4_0, the same KV pairs and depths.
# 1. GPU tests (8 shards) while synth makes both models: every CUDA attention test (TcPairsHeadSize256 and
#    TcPairsHeadSize64 among them), windows, the windowed fixture goldens (gemma2, gemma3, gpt-oss). If
#    TcPairsHeadSize256 fails, the gemma runs keep POLYKV_CUDA_ATTN_D8=pairs in every arm (noted) so (b) still runs.
# 2. The A/B runs, 2 rounds interleaved, order reversed in round 2 (-n 32 -r 3). 3. A timeline of gemma-3-4b at 32768
#    (q8_0/q8_0, new). 4. The kernel bench (DISABLED_DecodeModesBench: head size 256 first; pairs = slots there).
#    5. 131072, one round: llama-3.2-1b and gemma-3-4b q8_0/turbo3t, new and old.
# Carry .gpucarry/build-gpu.tar.xz and .gpucarry/fixtures-win (gemma2, gemma3, gptoss of
# ../shared/fixtures/models/random under models/random, 24 MB; docs/ and models/*.gguf moved aside).
[ -d .gpucarry/fixtures-win ] && [ ! -d .gpucarry/fixtures ] && mv .gpucarry/fixtures-win .gpucarry/fixtures
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS LIMIT=430 DEPTHS="32768 8192"
mkdir -p $OUT/logs $OUT/t
G=/tmp/g3-4b-q4_0.gguf S=/tmp/l1b-q4_0.gguf
[ -s $G ] || timeout 300 $P synth --shape gemma-3-4b --type q4_0 -o $G --threads 8 > $OUT/logs/synth-g3.log 2>&1 &
[ -s $S ] || timeout 300 $P synth --shape llama-3.2-1b --type q4_0 -o $S --threads 4 > $OUT/logs/synth-l1b.log 2>&1 &
gtest_shards 8 170 'CudaAttention*:*Window*:GptOssCuda.*:DenseGoldenCuda.*:FuseDecCuda.Gemma2*:FuseDecCuda.GptOss*'
wait
note "tests + synth done ($((SECONDS-t0)) s)"
GBASE=
if grep -q '^\[  FAILED  \] CudaAttentionDecode8.TcPairsHeadSize256' $OUT/shard*.log; then
  GBASE=POLYKV_CUDA_ATTN_D8=pairs
  note "TcPairsHeadSize256 FAILED: gemma arms all run POLYKV_CUDA_ATTN_D8=pairs (no head-size-256 A/B)"
fi
# arm TAG-PREFIX ROUND MODEL KVTAG KV DEPTH N REPS ENV...
for r in 1 2; do
  for d in $DEPTHS; do
    for kv in q8_0/q8_0 q8_0/turbo3t; do
      k=${kv/\//-}
      if [ $r = 1 ]; then order="new notc nowin"; else order="nowin notc new"; fi
      for arm in $order; do
        case $arm in
          new) bench_tagged $r new-g3-$k-d$d $P $G $kv $d 32 3 $GBASE ;;
          notc) [ -z "$GBASE" ] && bench_tagged $r notc-g3-$k-d$d $P $G $kv $d 32 3 POLYKV_CUDA_ATTN_D8=pairs ;;
          nowin) bench_tagged $r nowin-g3-$k-d$d $P $G $kv $d 32 3 POLYKV_CUDA_WINDOW_SPLITS=0 $GBASE ;;
        esac
      done
      if [ $r = 1 ]; then
        bench_tagged $r new-l1b-$k-d$d $P $S $kv $d 32 3; bench_tagged $r old-l1b-$k-d$d $P $S $kv $d 32 3 POLYKV_CUDA_ATTN_D8=pairs
      else
        bench_tagged $r old-l1b-$k-d$d $P $S $kv $d 32 3 POLYKV_CUDA_ATTN_D8=pairs; bench_tagged $r new-l1b-$k-d$d $P $S $kv $d 32 3
      fi
    done
  done
done
if [ $((SECONDS-t0)) -lt $LIMIT ]; then
  env $GBASE CUDA_INJECTION64_PATH=$PWD/build-gpu/lib/libpolykv_cuda_trace.so POLYKV_TRACE=/tmp/trace-g3.csv timeout 120 \
    $P bench -m $G --device cuda -r 1 -d 32768 -p 0 -n 24 -ctk q8_0 -ctv q8_0 > $OUT/logs/trace-g3.log 2>&1
  python3 scripts/cuda_trace_summary.py /tmp/trace-g3.csv --skip 4 > $OUT/t/trace-g3.summary.txt 2>&1
  note "trace g3 ($((SECONDS-t0)) s): $(grep -E "^period" $OUT/t/trace-g3.summary.txt)"
fi
if [ $((SECONDS-t0)) -lt $((LIMIT - 40)) ]; then
  timeout 60 $T --gtest_also_run_disabled_tests --gtest_filter='CudaAttentionDecode8.DISABLED_DecodeModesBench' \
    > $OUT/t/decode-modes-bench.txt 2>&1
  note "kernel bench done ($((SECONDS-t0)) s)"
fi
LIMIT=$((LIMIT + 40))
bench_tagged 1 new-l1b-q8_0-turbo3t-d131072 $P $S q8_0/turbo3t 131072 32 2
bench_tagged 1 old-l1b-q8_0-turbo3t-d131072 $P $S q8_0/turbo3t 131072 32 2 POLYKV_CUDA_ATTN_D8=pairs
[ -z "$GBASE" ] && bench_tagged 1 new-g3-q8_0-turbo3t-d131072 $P $G q8_0/turbo3t 131072 32 2
[ -z "$GBASE" ] && bench_tagged 1 notc-g3-q8_0-turbo3t-d131072 $P $G q8_0/turbo3t 131072 32 2 POLYKV_CUDA_ATTN_D8=pairs
tar cJf $OUT/logs.tar.xz -C $OUT logs t $(cd $OUT && ls shard*.log) && rm -rf $OUT/logs $OUT/t $OUT/shard*.log
note "done ($((SECONDS-t0)) s)"
