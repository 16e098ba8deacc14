#!/usr/bin/env bash
# 2026-12-06 call H7: the prefill tile's dequantization of split weights (H6: dequantize_split_kernel<DecQ4_K> /
# <DecQ5_K> 53 ms of a pp512 trace against 22 ms for q4_0 split and for q4_K ggml rows). Four kernels
# (POLYKV_CUDA_DEQUANT=old|old-cached|staged|staged-cached; this build's default staged-cached):
# (0) the kernel-level CUDA tests (q5_K's split layout on), incl. MatvecSplitCuda.DequantTileKernelsSameBits;
# (1) MatvecSplitCudaBench.DISABLED_DequantTile (GB/s per kernel and type);
# (2) CUPTI kernel totals of a pp512, q4_K old / staged-cached;
# (3) prefill (pp512, 2 rounds interleaved; pp4096 one round) per kernel, q4_K / q4_0 / q5_K split, q5_K rows.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
BW=3350; nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && BW=4800
for ty in q4_0 q4_K q5_K; do
  timeout 300 $P synth --shape llama-3.1-8b --type $ty -o /tmp/l8-$ty.gguf --threads 4 >>$OUT/synth.log 2>&1 &
done
POLYKV_CUDA_SPLIT_Q5K=1 gtest_shards 4 150 'MatvecSplitCuda.*:MmqCuda.*:MatmulCuda.*:MatmulPartsCuda.*:MoeCuda.*:*MoeV2Cuda.*:*MoeExpertsCuda.*:CudaBackendTest.*:OpsFusedCuda.*:-*DISABLED*'
timeout 90 $T --gtest_filter='MatvecSplitCudaBench.DISABLED_DequantTile' --gtest_also_run_disabled_tests \
  --gtest_color=no > $OUT/dequant_bench.txt 2>&1
note "dequant bench rc=$? at $((SECONDS-t0)) s"
grep -E "^(type|q[0-9])" $OUT/dequant_bench.txt >> $OUT/summary.txt
wait
note "synth done at $((SECONDS-t0)) s: $(ls -la /tmp/l8-*.gguf | awk '{print $5}' | paste -sd' ')"
trace() {  # trace NAME TYPE ENV...: kernel totals of one 512-token prefill
  local name=$1 ty=$2; shift 2
  env "$@" CUDA_INJECTION64_PATH=$PWD/build-gpu/lib/libpolykv_cuda_trace.so POLYKV_TRACE=/tmp/tr-$name.csv timeout 90 \
    $P bench -m /tmp/l8-$ty.gguf --device cuda -ctk f16 -ctv f16 -d 0 -p 512 -n 1 -r 1 --bandwidth $BW >>$OUT/run.log 2>&1
  python3 scripts/cuda_trace_totals.py /tmp/tr-$name.csv --top 6 > /tmp/trace-$name.txt 2>&1
  { echo "== trace $name"; cat /tmp/trace-$name.txt; } >> $OUT/summary.txt
}
trace q4_K-old q4_K POLYKV_CUDA_DEQUANT=old
trace q4_K-staged-cached q4_K POLYKV_CUDA_DEQUANT=staged-cached
pb() {  # pb ARM ROUND TYPE P ENV...
  local arm=$1 r=$2 ty=$3 p=$4; shift 4
  env "$@" timeout 90 $P bench -m /tmp/l8-$ty.gguf --device cuda -ctk f16 -ctv f16 -d 0 -p $p -n 16 -r 3 --bandwidth $BW --json \
    2>>$OUT/bench.err | grep '^{' | sed "s/^{/{\"arm\":\"$arm\",\"round\":$r,\"wtype\":\"$ty\",/" >>$OUT/pp.jsonl
  note "$ty p$p $arm r$r ($((SECONDS-t0)) s): $(tail -1 $OUT/pp.jsonl | grep -oE '"(prefill)_tok_s_reps":\[[^]]*\]' | tr -d '"')"
}
for r in 1 2; do
  for v in old old-cached staged staged-cached; do pb $v $r q4_K 512 POLYKV_CUDA_DEQUANT=$v; done
  pb rows $r q4_K 512 POLYKV_CUDA_MATVEC=old
  for v in old staged-cached; do pb $v $r q4_0 512 POLYKV_CUDA_DEQUANT=$v; done
  for v in old staged-cached; do pb split-$v $r q5_K 512 POLYKV_CUDA_SPLIT_Q5K=1 POLYKV_CUDA_DEQUANT=$v; done
  pb rows $r q5_K 512 POLYKV_CUDA_SPLIT_Q5K=0
done
for ty in q4_K q4_0; do for v in old staged-cached; do pb $v 1 $ty 4096 POLYKV_CUDA_DEQUANT=$v; done; done
pb split-staged-cached 1 q5_K 4096 POLYKV_CUDA_SPLIT_Q5K=1
cd $OUT && tar cJf h7-logs.tar.xz synth.log run.log bench.err shard*.log dequant_bench.txt && rm -f synth.log run.log bench.err shard*.log dequant_bench.txt
note "done at $((SECONDS-t0)) s"
