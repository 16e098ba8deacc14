#!/usr/bin/env bash
# 2026-12-01e call B: the helpers' GPU tests (parallel processes), then their benches (one at a time).
mkdir -p /work; ln -sfn $PWD /work/wt-gputest; [ -e /work/main ] || ln -sfn $PWD /work/main
tar xJf .gpucarry/build-gpu.tar.xz; mkdir -p /tmp/fx/models/random && tar xJf .gpucarry/fx.tar.xz -C /tmp/fx/models/random
[ -d .gpucarry/scripts ] && cp -n .gpucarry/scripts/* scripts/ 2>/dev/null
source scripts/gpu-lib.sh; BIN=build-gpu; SUMMARY=$OUT/summary.txt; setup_gpu_libraries
T=build-gpu/polykv_tests
G="--gtest_also_run_disabled_tests --gtest_color=no"
M=/tmp/llama-3.1-8b-q4_0.gguf
( build-gpu/polykv synth --shape llama-3.1-8b --type q4_0 -o $M --threads 6 > /dev/null 2>&1 ) &
SYN=$!
t0=$SECONDS
tst() { # name timeout env filter
  local n=$1 to=$2 e=$3 f=$4
  ( env $e timeout $to $T --gtest_filter="$f" --gtest_color=no > $OUT/$n.log 2>&1; rc=$?
    { echo "---- $n rc=$rc ($((SECONDS-t0)) s) env='$e'"; grep -E '^\[  (PASSED|FAILED) +\]|tests? from .* ran' $OUT/$n.log | sed 's/^/   /'; } >> $SUMMARY ) &
}
tst cubugs 150 "" 'CudaStepPlan.*:CudaGraphKv.*:EngineCuda.*'
tst cubugs-oldkey 60 "POLYKV_CUDA_GRAPH_KEY=host" 'CudaGraphKv.*'
tst moe 150 "POLYKV_FIXTURES=/tmp/fx" 'MoeCudaV2Host.*:*MoeV2Cuda*:MoeV2ModelCuda.*:MoeCuda.*:*MoeExpertsCuda*:MxfpCuda.*:MoeModelCuda.*:MoeRouterTies.*:MxfpCudaDecode.*'
tst gdn 150 "POLYKV_FIXTURES=/tmp/fx" 'HybridCuda.*:HybridCudaLayers.*:HybridAttentionCuda.*:GdnCuda.*'
tst mmq 150 "" 'MmqCuda.*'
tst tcdecode 200 "" 'CudaAttentionDecodeMma.*'
tst fusedec 200 "" 'FuseDecCuda.*:FusedDecodeSeam.*:ModelFusedCuda.*:ModelCuda.*:ModelCudaGraphs.*:CudaGraphRows.*:MtpCuda.*:OpsActsCuda.*:OpsFusedCuda.*:MatvecSplitCuda.*:MatmulPartsCuda.*'
wait
echo "==== tests done at $((SECONDS-t0)) s" >> $SUMMARY
# benches, one at a time
b() { local n=$1 to=$2 f=$3; shift 3; env "$@" timeout $to $T --gtest_filter="$f" $G > $OUT/$n.log 2>&1; echo "---- bench $n rc=$? ($((SECONDS-t0)) s)" >> $SUMMARY; }
b bench-mmq 70 'CudaMmqBench.DISABLED_VsOldPath'
b bench-tcdecode 90 'CudaAttentionDecodeMma.DISABLED_Bench'
b bench-moe 50 'MoeCudaBench.DISABLED_Qwen3Layer'
b bench-fuse-out 40 'FuseDecCudaBench.DISABLED_OutputProjections'
[ -x scripts/gpu-fuse-bench.sh ] && { ROUNDS=2 VARIANTS="fused= nofusenorm=POLYKV_CUDA_FUSE_NORM=0 plain=POLYKV_CUDA_FUSED=0" POLYKV_GPU_BUDGET_S=150 timeout 160 scripts/gpu-fuse-bench.sh > $OUT/fuse-bench.log 2>&1; echo "---- fuse-bench rc=$? ($((SECONDS-t0)) s)" >> $SUMMARY; }
cat $SUMMARY
for f in $OUT/*.log; do xz -9 $f; done
