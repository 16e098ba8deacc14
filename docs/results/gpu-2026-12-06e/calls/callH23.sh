#!/usr/bin/env bash
# 2026-12-06e call H23 (issue #9): Qwen 3's head norms and rope in one launch (qk_norm_rope), and Qwen 3 / Qwen 2.5
# side by side with llama.cpp 3f545bec (built here, never committed) on the same synth q4_K_M files.
# 1. GPU tests of the fused ops (op level: OpsFusedCuda.QkNormRope*, model level: FuseDecCuda.*) while llama.cpp
#    builds and the files are made.
# 2. POLYKV_CUDA_FUSE_QKNORM=0 against the default, synth qwen3-8b q4_K_M at depth 0, f16/f16 and q8_0/turbo3t,
#    2 rounds, the arms' order swapped in round 2; a timeline of each arm (kernels a token).
# 3. With llama.cpp (H23_LLAMA=1): qwen3-8b and qwen2.5-7b q4_K_M, interleaved run by run: decode at depth 0
#    (f16/f16, q8_0/q8_0; polykv also q8_0/turbo3t), pp512; round 1 of both files, then round 2.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
LLAMA=/tmp/llama.cpp; [ -n "$H23_LLAMA" ] && start_llama_build $OUT/llama-build.log
mkdir -p $OUT/logs $OUT/traces
Q3=/tmp/q3-q4_K_M.gguf Q25=/tmp/q25-q4_K_M.gguf
( timeout 280 $P synth --shape qwen3-8b --type q4_K_M -o $Q3 --threads 14 >>$OUT/logs/synth.log 2>&1
  note "synth qwen3-8b rc=$? at $((SECONDS-t0)) s"; touch /tmp/q3.done
  [ -n "$H23_LLAMA" ] && timeout 250 $P synth --shape qwen2.5-7b --type q4_K_M -o $Q25 --threads 14 >>$OUT/logs/synth.log 2>&1
  note "synth qwen2.5-7b done at $((SECONDS-t0)) s" ) &
SYN=$!
F='OpsFusedCuda.*:FuseDecCuda.*:DeferredNormCuda.*:ModelFusedCuda.*'
timeout 200 $T --gtest_filter="$F" --gtest_color=no > $OUT/logs/tests.log 2>&1
note "tests: rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' $OUT/logs/tests.log | paste -sd' ')"
grep -E '^\[  FAILED|Failure|SKIPPED \]' $OUT/logs/tests.log | head -20 >> $SUMMARY
while [ ! -e /tmp/q3.done ] && [ $((SECONDS-t0)) -lt 300 ]; do sleep 2; done
pk() {  # pk ROUND TAG MODEL ARGS...
  local r=$1 tag=$2 m=$3; shift 3
  if [ $((SECONDS-t0)) -gt 565 ]; then note "skip polykv $tag r$r (time)"; return; fi
  timeout 90 $P bench -m $m --device cuda -r 3 --json --bandwidth 3350 "$@" 2>> $OUT/logs/polykv.err | grep '^{' | sed "s/^{/{\"round\":$r,\"tag\":\"$tag\",/" >> $OUT/polykv.jsonl
  note "polykv $tag r$r ($((SECONDS-t0)) s): $(grep "\"round\":$r,\"tag\":\"$tag\"" $OUT/polykv.jsonl | grep -oE '"(decode|prefill)_tok_s_reps":\[[^]]*\]' | paste -sd' ')"
}
for r in 1 2; do
  a1=0; a2=1; [ $r = 2 ] && { a1=1; a2=0; }
  for kv in "f16 f16" "q8_0 turbo3t"; do
    set -- $kv
    POLYKV_CUDA_FUSE_QKNORM=$a1 pk $r qknorm-$a1-$1-$2 $Q3 -p 0 -n 128 -ctk $1 -ctv $2
    POLYKV_CUDA_FUSE_QKNORM=$a2 pk $r qknorm-$a2-$1-$2 $Q3 -p 0 -n 128 -ctk $1 -ctv $2
  done
done
for a in 0 1; do
  POLYKV_CUDA_FUSE_QKNORM=$a CUDA_INJECTION64_PATH=$PWD/build-gpu/lib/libpolykv_cuda_trace.so POLYKV_TRACE=/tmp/trace.csv \
    timeout 40 $P bench -m $Q3 --device cuda -ctk f16 -ctv f16 -d 0 -p 0 -n 32 -r 1 --bandwidth 3350 >/dev/null 2>>$OUT/logs/bench.err
  python3 scripts/cuda_trace_summary.py /tmp/trace.csv --skip 4 > $OUT/traces/trace-d0-q3-qknorm$a.summary.txt 2>&1
  note "trace qwen3 FUSE_QKNORM=$a: $(grep -E '^period' $OUT/traces/trace-d0-q3-qknorm$a.summary.txt)"
done
finish() { cd $OUT && cp llama-build.log logs/ 2>/dev/null; tar cJf h23-logs.tar.xz logs traces && rm -rf logs traces llama-build.log; note "done at $((SECONDS-t0)) s"; exit 0; }
[ -z "$H23_LLAMA" ] && finish
wait $SYN
[ -n "$LLAMA_PID" ] && wait $LLAMA_PID
LB=$LLAMA/build/bin/llama-bench
[ -x $LB ] || { note "llama-bench not built"; tail -30 $OUT/llama-build.log >> $SUMMARY; finish; }
note "llama.cpp ready at $((SECONDS-t0)) s"
ll() {  # ll ROUND TAG MODEL ARGS...
  local r=$1 tag=$2 m=$3; shift 3
  if [ $((SECONDS-t0)) -gt 560 ]; then note "skip llama $tag r$r (time)"; return; fi
  timeout 90 $LB -m $m -ngl 99 -fa 1 -r 3 -o jsonl "$@" 2>> $OUT/logs/llama.err | sed "s/^{/{\"round\":$r,\"tag\":\"$tag\",/" >> $OUT/llama.jsonl
  note "llama $tag r$r ($((SECONDS-t0)) s): $(grep "\"round\":$r,\"tag\":\"$tag\"" $OUT/llama.jsonl | grep -oE '"samples_ts": *\[[^]]*\]' | paste -sd' ')"
}
for r in 1 2; do
  for m in $Q3 $Q25; do
    [ -s $m ] || continue
    b=$(basename $m .gguf)
    ll $r $b-tg-f16 $m -p 0 -n 128 -ctk f16 -ctv f16
    pk $r $b-tg-f16 $m -p 0 -n 128 -ctk f16 -ctv f16
    ll $r $b-tg-q8 $m -p 0 -n 128 -ctk q8_0 -ctv q8_0
    pk $r $b-tg-q8 $m -p 0 -n 128 -ctk q8_0 -ctv q8_0
    pk $r $b-tg-t3t $m -p 0 -n 128 -ctk q8_0 -ctv turbo3t
    ll $r $b-pp512 $m -p 512 -n 0 -ctk f16 -ctv f16
    pk $r $b-pp512 $m -p 512 -n 1 -ctk f16 -ctv f16
  done
done
finish
