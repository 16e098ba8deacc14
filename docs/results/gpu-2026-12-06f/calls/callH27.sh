#!/usr/bin/env bash
# 2026-12-06f call H27 (issue #9; NOT RUN: no device time was left): the fused one-token MoE FFN after H26's timeline: routing with the logits in
# registers (no memory reads per round, the chosen exps summed after the rounds in slot order), and the gate+up
# launch issuing its first weight loads before it quantizes x, the next unit's loads during each unit's dots.
# Trimmed to the 455 s of device time left: no gpt-oss-20b, no llama.cpp (H26 measured it side by side).
# 1. GPU tests (MoE kernels and models, the qwen3moe / gptoss fixture goldens, f32 mat-vecs) while the file is
#    made: synth qwen3-30b-a3b q4_0 (48 layers).
# 2. Timelines (f16/f16): base (main a6d7ce6, .gpucarry/polykv-base.xz) and this build.
# 3. Interleaved, 2 rounds (order swapped in round 2): base vs this build, decode at depth 0 f16/f16 and
#    q8_0/turbo3t.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
xz -dc .gpucarry/polykv-base.xz > build-gpu/polykv-base && chmod +x build-gpu/polykv-base
B=build-gpu/polykv-base
mkdir -p $OUT/logs $OUT/traces
M=/tmp/q3moe-q4_0.gguf G=/tmp/gptoss-q4_0.gguf
( timeout 200 $P synth --shape qwen3-30b-a3b --type q4_0 -o $M --threads 14 >>$OUT/logs/synth.log 2>&1
  note "synth qwen3-30b-a3b rc=$? at $((SECONDS-t0)) s"; touch /tmp/moe.done ) &
F='*MoeV2Cuda*:*MoeV2ModelCuda*:*MoeModelCuda*:*MoeCuda.*:*MoeExpertsCuda*:*GptOssCuda*:MatmulCuda.MatvecMatchesReferenceEveryTypeAndWidth'
timeout 150 $T --gtest_filter="$F" --gtest_color=no > $OUT/logs/tests.log 2>&1
note "tests: rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' $OUT/logs/tests.log | paste -sd' ')"
grep -E '^\[  FAILED|Failure|SKIPPED \]' $OUT/logs/tests.log | head -30 >> $SUMMARY
while [ ! -e /tmp/moe.done ] && [ $((SECONDS-t0)) -lt 220 ]; do sleep 2; done
[ -s $M ] || { note "no model"; exit 0; }
pk() {  # pk BIN ROUND TAG MODEL ARGS...
  local bin=$1 r=$2 tag=$3 m=$4; shift 4
  if [ $((SECONDS-t0)) -gt 300 ]; then note "skip $tag r$r (time)"; return; fi
  timeout 100 $bin bench -m $m --device cuda -r 3 --json --bandwidth 3350 "$@" 2>> $OUT/logs/polykv.err | grep '^{' | sed "s/^{/{\"round\":$r,\"tag\":\"$tag\",/" >> $OUT/polykv.jsonl
  note "$tag r$r ($((SECONDS-t0)) s): $(grep "\"round\":$r,\"tag\":\"$tag\"" $OUT/polykv.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]' | paste -sd' ')"
}
for arm in base new; do
  bin=$P; [ $arm = base ] && bin=$B
  CUDA_INJECTION64_PATH=$PWD/build-gpu/lib/libpolykv_cuda_trace.so POLYKV_TRACE=/tmp/trace.csv \
    timeout 60 $bin bench -m $M --device cuda -ctk f16 -ctv f16 -d 0 -p 0 -n 32 -r 1 --bandwidth 3350 >/dev/null 2>>$OUT/logs/bench.err
  python3 scripts/cuda_trace_summary.py /tmp/trace.csv --skip 4 > $OUT/traces/trace-d0-moe-$arm.summary.txt 2>&1
  note "trace $arm: $(grep -E '^period' $OUT/traces/trace-d0-moe-$arm.summary.txt)"
done
for r in 1 2; do
  a1=$B; a2=$P; n1=base; n2=new; [ $r = 2 ] && { a1=$P; a2=$B; n1=new; n2=base; }
  for m in $M $G; do
    [ -s $m ] || continue
    b=$(basename $m .gguf)
    for kv in "f16 f16" "q8_0 turbo3t"; do
      set -- $kv
      pk $a1 $r $n1-$b-tg-$1-$2 $m -p 0 -n 128 -ctk $1 -ctv $2
      pk $a2 $r $n2-$b-tg-$1-$2 $m -p 0 -n 128 -ctk $1 -ctv $2
    done
  done
done
cd $OUT && tar cJf h27-logs.tar.xz logs && rm -rf logs; note "done at $((SECONDS-t0)) s"
