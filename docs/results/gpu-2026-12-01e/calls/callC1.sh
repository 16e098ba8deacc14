#!/usr/bin/env bash
# 2026-12-01e call C1: llama.cpp build in the background; GPU tests of merged main (parallel); bench-agents; depth 131072.
mkdir -p /work; ln -sfn $PWD /work/wt-gputest; [ -e /work/main ] || ln -sfn $PWD /work/main
[ -x build-gpu/polykv_tests ] || tar xJf .gpucarry/build-gpu.tar.xz
source scripts/gpu-lib.sh; BIN=build-gpu; SUMMARY=$OUT/summary.txt; setup_gpu_libraries
note "commit $(git rev-parse --short HEAD 2>/dev/null); $(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader)"
LLAMA=/tmp/llama.cpp; start_llama_build $OUT/llama-build.log
T=build-gpu/polykv_tests; M=/tmp/llama-3.1-8b-q4_0.gguf
( [ -s $M ] || build-gpu/polykv synth --shape llama-3.1-8b --type q4_0 -o $M --threads 4 > /dev/null 2>&1 ) &
t0=$SECONDS
tst() { local n=$1 to=$2 e=$3 f=$4
  ( env $e timeout $to $T --gtest_filter="$f" --gtest_color=no > $OUT/$n.log 2>&1; rc=$?
    { echo "---- $n rc=$rc ($((SECONDS-t0)) s) env='$e'"; grep -E '^\[  (PASSED|FAILED) +\]|tests? from .* ran' $OUT/$n.log | sed 's/^/   /'; } >> $SUMMARY ) & }
tst engine 150 "" 'CudaStepPlan.*:CudaGraphKv.*:EngineCuda.*:CudaGraphRows.*'
tst model 200 "" 'FuseDecCuda.*:FusedDecodeSeam.*:ModelFusedCuda.*:ModelCuda.*:ModelCudaGraphs.*:MtpCuda.*:OpsActsCuda.*:OpsFusedCuda.*:OpsCuda.*:MatvecSplitCuda.*:MatmulPartsCuda.*:CudaKvStore.*:CudaBackendKv.*'
tst mmq 150 "" 'MmqCuda.*'
tst moe 150 "" 'MoeCudaV2Host.*:*MoeV2Cuda*:MoeCuda.*:*MoeExpertsCuda*:MxfpCuda.*:MxfpCudaDecode.*'
tst attn 240 "" 'CudaAttentionDecodeMma.*:CudaAttention.*:CudaAttentionDecode8.*:CudaAttentionSinks.*:CudaAttentionSmallDepth.*:CudaHalfSplit*'
wait
note "==== tests done at $((SECONDS-t0)) s"
for b in CudaMmqBench.DISABLED_VsOldPath FuseDecCudaBench.DISABLED_OutputProjections FuseDecCudaBench.DISABLED_GateUpGated; do timeout 60 $T --gtest_filter=$b --gtest_also_run_disabled_tests > $OUT/bench-$b.log 2>&1; note "bench $b rc=$? at $((SECONDS-t0)) s"; done
# the many-agent figure (issue #9 target: 64 agents >= 10x one agent)
timeout 200 build-gpu/polykv bench-agents -m $M --device cuda --agents 1,16,64 --share on --context 32768 --suffix 32 --gen 32 --json 2>$OUT/agents.err | grep '^{' > $OUT/agents.jsonl
note "agents: $(grep -oE '"agents":[0-9]+|"decode_tok_s":[0-9.]+|"kv_peak_bytes":[0-9]+|"decode_step_s":[0-9.]+' $OUT/agents.jsonl | paste -sd' ')"
note "==== agents done at $((SECONDS-t0)) s; llama build $(kill -0 ${LLAMA_PID:-0} 2>/dev/null && echo running || echo done)"
WORK=/tmp/moework TYPES=q4_0 timeout 150 bench/moe_cuda_v2_bench.sh build-gpu/polykv $OUT 3 > $OUT/moe-bench.log 2>&1
note "moe v1/v2: $(grep -oE '"moe_kernel":"v[12]"|"decode_tok_s":[0-9.]+|"prefill_tok_s":[0-9.]+' $OUT/moe-v1-v2.jsonl | paste -sd' ')"
if (( SECONDS - t0 < 300 )); then
  timeout 150 build-gpu/polykv bench -m $M --device cuda -p 0 -n 32 -d 131072 -r 2 -ctk q8_0 -ctv turbo3t --json --bandwidth 4240 2>/dev/null | grep '^{' >> $OUT/d131072.jsonl
  note "d131072 q8_0/turbo3t: $(grep -oE '"decode_tok_s_reps":\[[^]]*\]' $OUT/d131072.jsonl)"
fi
while kill -0 ${LLAMA_PID:-0} 2>/dev/null && (( SECONDS - t0 < 480 )); do sleep 3; done
note "llama-bench: $(ls -la $LLAMA/build/bin/llama-bench 2>&1) at $((SECONDS-t0)) s"
cd $OUT && tar cJf results.tar.xz *.log *.err *.jsonl 2>/dev/null; rm -f *.log *.err
