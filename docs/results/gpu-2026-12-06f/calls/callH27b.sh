#!/usr/bin/env bash
# 2026-12-06f call H27b (issue #9; NOT RUN: refused, too little device time left): call H27 cut to the ~240 s of device time left. The GPU tests of the MoE kernels
# (routing with the logits in registers; the gate+up launch's early weight loads) and an interleaved A/B on a
# 12-layer cut of synth qwen3-30b-a3b q4_0: base (main a6d7ce6, .gpucarry/polykv-base.xz) vs this build, decode at
# depth 0, f16/f16, 2 rounds (order swapped in round 2); one timeline of this build.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
xz -dc .gpucarry/polykv-base.xz > build-gpu/polykv-base && chmod +x build-gpu/polykv-base
B=build-gpu/polykv-base
mkdir -p $OUT/logs $OUT/traces
M=/tmp/q3moe-l12-q4_0.gguf
( timeout 100 $P synth --shape qwen3-30b-a3b --type q4_0 --layers 12 -o $M --threads 14 >>$OUT/logs/synth.log 2>&1
  note "synth rc=$? at $((SECONDS-t0)) s"; touch /tmp/moe.done ) &
F='*MoeV2Cuda*:*MoeV2ModelCuda*:*MoeModelCuda*:*MoeCuda.*:*MoeExpertsCuda*:*GptOssCuda*'
timeout 90 $T --gtest_filter="$F" --gtest_color=no > $OUT/logs/tests.log 2>&1
note "tests: rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' $OUT/logs/tests.log | paste -sd' ')"
grep -E '^\[  FAILED|Failure' $OUT/logs/tests.log | head -20 >> $SUMMARY
while [ ! -e /tmp/moe.done ] && [ $((SECONDS-t0)) -lt 110 ]; do sleep 1; done
[ -s $M ] || { note "no model"; exit 0; }
pk() {  # pk BIN ROUND TAG ARGS...
  local bin=$1 r=$2 tag=$3; shift 3
  if [ $((SECONDS-t0)) -gt 190 ]; then note "skip $tag r$r (time)"; return; fi
  timeout 40 $bin bench -m $M --device cuda -r 3 --json --bandwidth 3350 "$@" 2>> $OUT/logs/polykv.err | grep '^{' | sed "s/^{/{\"round\":$r,\"tag\":\"$tag\",/" >> $OUT/polykv.jsonl
  note "$tag r$r ($((SECONDS-t0)) s): $(grep "\"round\":$r,\"tag\":\"$tag\"" $OUT/polykv.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]' | paste -sd' ')"
}
for r in 1 2; do
  a1=$B; a2=$P; n1=base; n2=new; [ $r = 2 ] && { a1=$P; a2=$B; n1=new; n2=base; }
  pk $a1 $r $n1-l12-tg-f16-f16 -p 0 -n 128 -ctk f16 -ctv f16
  pk $a2 $r $n2-l12-tg-f16-f16 -p 0 -n 128 -ctk f16 -ctv f16
done
if [ $((SECONDS-t0)) -lt 190 ]; then
  CUDA_INJECTION64_PATH=$PWD/build-gpu/lib/libpolykv_cuda_trace.so POLYKV_TRACE=/tmp/trace.csv \
    timeout 30 $P bench -m $M --device cuda -ctk f16 -ctv f16 -d 0 -p 0 -n 32 -r 1 --bandwidth 3350 >/dev/null 2>>$OUT/logs/bench.err
  python3 scripts/cuda_trace_summary.py /tmp/trace.csv --skip 4 > $OUT/traces/trace-d0-moe-l12-new.summary.txt 2>&1
  note "trace new: $(grep -E '^period' $OUT/traces/trace-d0-moe-l12-new.summary.txt)"
fi
cd $OUT && tar cJf h27b-logs.tar.xz logs && rm -rf logs; note "done at $((SECONDS-t0)) s"
