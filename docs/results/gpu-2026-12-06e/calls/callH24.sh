#!/usr/bin/env bash
# 2026-12-06e call H24 (issue #9): Gemma's post-norms folded into the deferred norm after them
# (post_norm_into_matmul). GPU tests of the new launch (op level: DeferredNormCuda.PostNormIntoMatmul*, model level:
# FuseDecCuda.SandwichNorm* on synth tiny-gemma3 q8_0), the head-norm model test again, and the gemma3 fixture's CUDA
# golden against transformers (Model/DenseGoldenCuda.*/4; the other dense fixtures were not carried and skip) while
# synth gemma-3-4b q4_K_M is made; then POLYKV_CUDA_FUSE_POSTNORM=0 against the default at depth 0, f16/f16 and
# q8_0/turbo3t, 3 rounds (round 2 swapped), and a timeline of each arm.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
mkdir -p $OUT/logs $OUT/traces
G=/tmp/g3-q4_K_M.gguf
( timeout 150 $P synth --shape gemma-3-4b --type q4_K_M -o $G --threads 16 >>$OUT/logs/synth.log 2>&1
  note "synth gemma-3-4b rc=$? at $((SECONDS-t0)) s"; touch /tmp/g3.done ) &
F='DeferredNormCuda.*:FuseDecCuda.SandwichNorm*:FuseDecCuda.HeadNorm*:FuseDecCuda.ModelLogits*:Model/DenseGoldenCuda.*'
timeout 150 $T --gtest_filter="$F" --gtest_color=no > $OUT/logs/tests.log 2>&1
note "tests: rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' $OUT/logs/tests.log | paste -sd' ')"
grep -E '^\[  FAILED|Failure' $OUT/logs/tests.log | head -20 >> $SUMMARY
while [ ! -e /tmp/g3.done ] && [ $((SECONDS-t0)) -lt 200 ]; do sleep 2; done
pk() {  # pk ROUND TAG ARGS...
  local r=$1 tag=$2; shift 2
  timeout 60 $P bench -m $G --device cuda -r 3 --json --bandwidth 3350 "$@" 2>> $OUT/logs/polykv.err | grep '^{' | sed "s/^{/{\"round\":$r,\"tag\":\"$tag\",/" >> $OUT/ab.jsonl
  note "$tag r$r ($((SECONDS-t0)) s): $(grep "\"round\":$r,\"tag\":\"$tag\"" $OUT/ab.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]')"
}
for r in 1 2 3; do
  a1=0; a2=1; [ $r = 2 ] && { a1=1; a2=0; }
  for kv in "f16 f16" "q8_0 turbo3t"; do
    set -- $kv
    POLYKV_CUDA_FUSE_POSTNORM=$a1 pk $r postnorm-$a1-$1-$2 -p 0 -n 128 -ctk $1 -ctv $2
    POLYKV_CUDA_FUSE_POSTNORM=$a2 pk $r postnorm-$a2-$1-$2 -p 0 -n 128 -ctk $1 -ctv $2
  done
done
for a in 0 1; do
  POLYKV_CUDA_FUSE_POSTNORM=$a CUDA_INJECTION64_PATH=$PWD/build-gpu/lib/libpolykv_cuda_trace.so POLYKV_TRACE=/tmp/trace.csv \
    timeout 40 $P bench -m $G --device cuda -ctk f16 -ctv f16 -d 0 -p 0 -n 32 -r 1 >/dev/null 2>>$OUT/logs/bench.err
  python3 scripts/cuda_trace_summary.py /tmp/trace.csv --skip 4 > $OUT/traces/trace-d0-g3-postnorm$a.summary.txt 2>&1
  note "trace gemma-3-4b FUSE_POSTNORM=$a: $(grep -E '^period' $OUT/traces/trace-d0-g3-postnorm$a.summary.txt)"
done
cd $OUT && tar cJf h24-logs.tar.xz logs traces && rm -rf logs traces
note "done at $((SECONDS-t0)) s"
