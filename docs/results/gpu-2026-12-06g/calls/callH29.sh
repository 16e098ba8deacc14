#!/usr/bin/env bash
# Call H29 (2026-12-06g): MoE decode, four arms in two binaries.
#   base    = main 4403a17's polykv (carried as .gpucarry/polykv-base.xz);
#   new     = this build: routing with the logits in registers and gate+up's first weight loads before it
#             quantizes x (the H27 patch); the down launch's experts and first weight loads before its wait
#             (POLYKV_CUDA_MOE_DOWN_EARLY); the f32 router's activations staged in shared memory
#             (POLYKV_CUDA_MATVEC_X_SMEM);
#   noearly = new with POLYKV_CUDA_MOE_DOWN_EARLY=0;  nosmem = new with POLYKV_CUDA_MATVEC_X_SMEM=0.
# 1. GPU tests (MoE kernels and models; fixture goldens) while synth makes qwen3-30b-a3b q4_0 (48 layers)
#    and gpt-oss-20b q4_0 (24 layers).
# 2. Timelines (qwen3-30b-a3b, f16/f16) of the four arms.
# 3. Interleaved, 2 rounds (order reversed in round 2): decode at depth 0, qwen3 f16/f16 (four arms), qwen3
#    q8_0/turbo3t and gpt-oss f16/f16 (base, new); then llama.cpp 3f545bec (built here, never committed) vs
#    new, f16/f16, both files.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
xz -dc .gpucarry/polykv-base.xz > build-gpu/polykv-base && chmod +x build-gpu/polykv-base
B=build-gpu/polykv-base
LLAMA=/tmp/llama.cpp; start_llama_build $OUT/llama-build.log
mkdir -p $OUT/logs $OUT/traces
M=/tmp/q3moe-q4_0.gguf G=/tmp/gptoss-q4_0.gguf
( timeout 200 $P synth --shape qwen3-30b-a3b --type q4_0 -o $M --threads 6 >>$OUT/logs/synth.log 2>&1
  note "synth qwen3-30b-a3b rc=$? at $((SECONDS-t0)) s"; touch /tmp/moe.done ) &
( timeout 200 $P synth --shape gpt-oss-20b --type q4_0 -o $G --threads 6 >>$OUT/logs/synth.log 2>&1
  note "synth gpt-oss-20b rc=$? at $((SECONDS-t0)) s"; touch /tmp/gpt.done ) &
F='*MoeV2Cuda*:*MoeV2ModelCuda*:*MoeModelCuda*:*MoeCuda.*:*MoeExpertsCuda*:*GptOssCuda*:MatmulCuda.MatvecMatchesReferenceEveryTypeAndWidth:MatmulCuda.StreamKernelEverySplitBitExact:MatmulCuda.BatchInvariantBitForBit'
timeout 170 $T --gtest_filter="$F" --gtest_color=no > $OUT/logs/tests.log 2>&1
note "tests: rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' $OUT/logs/tests.log | paste -sd' ')"
grep -E '^\[  FAILED|Failure' $OUT/logs/tests.log | head -30 >> $SUMMARY
while [ ! -e /tmp/moe.done ] && [ $((SECONDS-t0)) -lt 220 ]; do sleep 2; done
[ -s $M ] || { note "no model"; exit 0; }
arm_bin() { case $1 in base) echo $B ;; *) echo $P ;; esac; }
arm_env() { case $1 in noearly) echo POLYKV_CUDA_MOE_DOWN_EARLY=0 ;; nosmem) echo POLYKV_CUDA_MATVEC_X_SMEM=0 ;; *) echo POLYKV_ARM=$1 ;; esac; }
pk() {  # pk ARM ROUND TAG MODEL ARGS...
  local arm=$1 r=$2 tag=$3 m=$4; shift 4
  if [ $((SECONDS-t0)) -gt ${LIMIT:-530} ]; then note "skip $tag r$r (time)"; return; fi
  env $(arm_env $arm) timeout 100 $(arm_bin $arm) bench -m $m --device cuda -r 3 --json --bandwidth 3350 "$@" 2>> $OUT/logs/polykv.err | grep '^{' | sed "s/^{/{\"round\":$r,\"tag\":\"$tag\",/" >> $OUT/polykv.jsonl
  note "$tag r$r ($((SECONDS-t0)) s): $(grep "\"round\":$r,\"tag\":\"$tag\"" $OUT/polykv.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]' | paste -sd' ')"
}
for arm in base new noearly nosmem; do
  env $(arm_env $arm) CUDA_INJECTION64_PATH=$PWD/build-gpu/lib/libpolykv_cuda_trace.so POLYKV_TRACE=/tmp/trace.csv \
    timeout 60 $(arm_bin $arm) bench -m $M --device cuda -ctk f16 -ctv f16 -d 0 -p 0 -n 32 -r 1 --bandwidth 3350 >/dev/null 2>>$OUT/logs/bench.err
  python3 scripts/cuda_trace_summary.py /tmp/trace.csv --skip 4 > $OUT/traces/trace-d0-moe-$arm.summary.txt 2>&1
  note "trace $arm: $(grep -E '^period' $OUT/traces/trace-d0-moe-$arm.summary.txt)"
done
while [ ! -e /tmp/gpt.done ] && [ $((SECONDS-t0)) -lt 260 ]; do sleep 2; done
for r in 1 2; do
  for cfg in "$M f16 f16 4" "$M q8_0 turbo3t 2" "$G f16 f16 2"; do
    set -- $cfg; m=$1 k=$2 v=$3
    arms="base new noearly nosmem"; [ $4 = 2 ] && arms="base new"
    [ $r = 2 ] && arms=$(echo $arms | tr ' ' '\n' | tac | paste -sd' ')
    [ -s $m ] || continue
    b=$(basename $m .gguf)
    for arm in $arms; do pk $arm $r $arm-$b-tg-$k-$v $m -p 0 -n 128 -ctk $k -ctv $v; done
  done
done
finish() { cd $OUT && cp llama-build.log logs/ 2>/dev/null; tar cJf h29-logs.tar.xz logs && rm -rf logs llama-build.log; note "done at $((SECONDS-t0)) s"; exit 0; }
[ -n "$LLAMA_PID" ] && wait $LLAMA_PID
LB=$LLAMA/build/bin/llama-bench
[ -x $LB ] || { note "llama-bench not built"; tail -30 $OUT/llama-build.log >> $SUMMARY; finish; }
ll() {  # ll ROUND TAG MODEL ARGS...
  local r=$1 tag=$2 m=$3; shift 3
  if [ $((SECONDS-t0)) -gt ${LIMIT:-530} ]; then note "skip llama $tag r$r (time)"; return; fi
  timeout 100 $LB -m $m -ngl 99 -fa 1 -r 3 -o jsonl "$@" 2>> $OUT/logs/llama.err | sed "s/^{/{\"round\":$r,\"tag\":\"$tag\",/" >> $OUT/llama.jsonl
  note "llama $tag r$r ($((SECONDS-t0)) s): $(grep "\"round\":$r,\"tag\":\"$tag\"" $OUT/llama.jsonl | grep -oE '"samples_ts": *\[[^]]*\]' | paste -sd' ')"
}
for r in 1 2; do
  for m in $M $G; do
    [ -s $m ] || continue
    b=$(basename $m .gguf)
    ll $r $b-tg-f16 $m -p 0 -n 128 -ctk f16 -ctv f16
    pk new $r vsllama-$b-tg-f16 $m -p 0 -n 128 -ctk f16 -ctv f16
  done
done
finish
