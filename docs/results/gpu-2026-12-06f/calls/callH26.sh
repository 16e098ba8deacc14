#!/usr/bin/env bash
# 2026-12-06f call H26 (issue #9): MoE decode on the GPU, never compared with llama.cpp before, and the one-token
# MoE FFN in two fused launches (moe_cuda_decode.cu; the router's f32 mat-vec reading x without a copy; the
# routing kernel with PDL; the routing inside the gate+up launch, POLYKV_CUDA_MOE_FUSED=noroute: apart).
# 1. GPU tests of the MoE kernels and models (the fused path = the five kernels' bits), f32 mat-vecs, the
#    qwen3moe / gptoss fixture goldens, while llama.cpp 3f545bec builds (never committed) and the file is made.
# 2. synth qwen3-30b-a3b q4_0 (all 48 layers). Timelines of a decode token: base binary (main a6d7ce6, carried as
#    .gpucarry/polykv-base.xz), this build with the routing kernel apart (noroute), this build.
# 3. Interleaved, 2 rounds (order rotated): the three arms, decode at depth 0 f16/f16 (and q8_0/turbo3t in round
#    1); then llama.cpp vs this build: decode f16/f16, q8_0/q8_0, pp512.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
xz -dc .gpucarry/polykv-base.xz > build-gpu/polykv-base && chmod +x build-gpu/polykv-base
B=build-gpu/polykv-base
LLAMA=/tmp/llama.cpp; start_llama_build $OUT/llama-build.log
mkdir -p $OUT/logs $OUT/traces
M=/tmp/q3moe-q4_0.gguf
( timeout 300 $P synth --shape qwen3-30b-a3b --type q4_0 -o $M --threads 8 >>$OUT/logs/synth.log 2>&1
  note "synth qwen3-30b-a3b rc=$? at $((SECONDS-t0)) s"; touch /tmp/moe.done ) &
F='MoeV2Cuda.*:MoeV2ModelCuda.*:MoeModelCuda.*:MoeCuda.*:MoeExpertsCuda.*:GptOssCuda.*:MatmulCuda.MatvecMatchesReferenceEveryTypeAndWidth'
timeout 150 $T --gtest_filter="$F" --gtest_color=no > $OUT/logs/tests.log 2>&1
note "tests: rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' $OUT/logs/tests.log | paste -sd' ')"
grep -E '^\[  FAILED|Failure|SKIPPED \]' $OUT/logs/tests.log | head -30 >> $SUMMARY
while [ ! -e /tmp/moe.done ] && [ $((SECONDS-t0)) -lt 330 ]; do sleep 2; done
[ -s $M ] || { note "no model"; exit 0; }
pk() {  # pk BIN ROUND TAG ARGS...
  local bin=$1 r=$2 tag=$3; shift 3
  if [ $((SECONDS-t0)) -gt 565 ]; then note "skip $tag r$r (time)"; return; fi
  timeout 100 $bin bench -m $M --device cuda -r 3 --json --bandwidth 3350 "$@" 2>> $OUT/logs/polykv.err | grep '^{' | sed "s/^{/{\"round\":$r,\"tag\":\"$tag\",/" >> $OUT/polykv.jsonl
  note "$tag r$r ($((SECONDS-t0)) s): $(grep "\"round\":$r,\"tag\":\"$tag\"" $OUT/polykv.jsonl | grep -oE '"(decode|prefill)_tok_s_reps":\[[^]]*\]' | paste -sd' ')"
}
arm_run() {  # arm_run ARM CMD...: CMD with the arm's switch (noroute: the routing kernel apart)
  local arm=$1; shift
  if [ $arm = noroute ]; then export POLYKV_CUDA_MOE_FUSED=noroute; fi
  "$@"
  unset POLYKV_CUDA_MOE_FUSED
}
bin_of() { [ $1 = base ] && echo $B || echo $P; }
for arm in base noroute new; do
  bin=$(bin_of $arm)
  arm_run $arm env CUDA_INJECTION64_PATH=$PWD/build-gpu/lib/libpolykv_cuda_trace.so POLYKV_TRACE=/tmp/trace.csv \
    timeout 60 $bin bench -m $M --device cuda -ctk f16 -ctv f16 -d 0 -p 0 -n 32 -r 1 --bandwidth 3350 >/dev/null 2>>$OUT/logs/bench.err
  python3 scripts/cuda_trace_summary.py /tmp/trace.csv --skip 4 > $OUT/traces/trace-d0-moe-$arm.summary.txt 2>&1
  note "trace $arm: $(grep -E '^period' $OUT/traces/trace-d0-moe-$arm.summary.txt)"
done
for r in 1 2; do
  order="base noroute new"; [ $r = 2 ] && order="new noroute base"
  kvs="f16:f16 q8_0:turbo3t"; [ $r = 2 ] && kvs="f16:f16"
  for kv in $kvs; do
    for arm in $order; do
      arm_run $arm pk $(bin_of $arm) $r $arm-tg-${kv/:/-} -p 0 -n 128 -ctk ${kv%:*} -ctv ${kv#*:}
    done
  done
done
finish() { cd $OUT && cp llama-build.log logs/ 2>/dev/null; tar cJf h26-logs.tar.xz logs && rm -rf logs llama-build.log; note "done at $((SECONDS-t0)) s"; exit 0; }
[ -n "$LLAMA_PID" ] && wait $LLAMA_PID
LB=$LLAMA/build/bin/llama-bench
[ -x $LB ] || { note "llama-bench not built"; tail -30 $OUT/llama-build.log >> $SUMMARY; finish; }
note "llama.cpp ready at $((SECONDS-t0)) s"
ll() {  # ll ROUND TAG ARGS...
  local r=$1 tag=$2; shift 2
  if [ $((SECONDS-t0)) -gt 560 ]; then note "skip llama $tag r$r (time)"; return; fi
  timeout 100 $LB -m $M -ngl 99 -fa 1 -r 3 -o jsonl "$@" 2>> $OUT/logs/llama.err | sed "s/^{/{\"round\":$r,\"tag\":\"$tag\",/" >> $OUT/llama.jsonl
  note "llama $tag r$r ($((SECONDS-t0)) s): $(grep "\"round\":$r,\"tag\":\"$tag\"" $OUT/llama.jsonl | grep -oE '"samples_ts": *\[[^]]*\]' | paste -sd' ')"
}
for r in 1 2; do
  ll $r tg-f16 -p 0 -n 128 -ctk f16 -ctv f16
  pk $P $r new-vs-llama-tg-f16 -p 0 -n 128 -ctk f16 -ctv f16
  ll $r tg-q8 -p 0 -n 128 -ctk q8_0 -ctv q8_0
  pk $P $r new-vs-llama-tg-q8 -p 0 -n 128 -ctk q8_0 -ctv q8_0
  ll $r pp512 -p 512 -n 0 -ctk f16 -ctv f16
  pk $P $r new-vs-llama-pp512 -p 512 -n 1 -ctk f16 -ctv f16
done
finish
