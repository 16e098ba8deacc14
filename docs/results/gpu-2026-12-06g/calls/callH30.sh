#!/usr/bin/env bash
# Call H30 (2026-12-06g): the H27 patch alone (routing with the logits in registers, gate+up's first weight loads
# before it quantizes x) against main 4403a17 (the fused path as H26 measured it; .gpucarry/polykv-main.xz).
# The MoE GPU tests while synth makes qwen3-30b-a3b q4_0 and gpt-oss-20b q4_0; timelines of both arms on both
# files; decode at depth 0 interleaved, 2 rounds (order reversed in round 2).
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
xz -dc .gpucarry/polykv-main.xz > build-gpu/polykv-main && chmod +x build-gpu/polykv-main
B=build-gpu/polykv-main
mkdir -p $OUT/logs $OUT/traces
M=/tmp/q3moe-q4_0.gguf G=/tmp/gptoss-q4_0.gguf
[ -s $M ] || ( timeout 200 $P synth --shape qwen3-30b-a3b --type q4_0 -o $M --threads 8 >>$OUT/logs/synth.log 2>&1
  note "synth qwen3-30b-a3b rc=$? at $((SECONDS-t0)) s"; touch /tmp/moe.done ) &
[ -s $G ] || ( timeout 200 $P synth --shape gpt-oss-20b --type q4_0 -o $G --threads 8 >>$OUT/logs/synth.log 2>&1
  note "synth gpt-oss-20b rc=$? at $((SECONDS-t0)) s"; touch /tmp/gpt.done ) &
timeout 80 $T --gtest_filter='*MoeV2Cuda*:*MoeModelCuda*:*GptOssCuda*' --gtest_color=no > $OUT/logs/tests.log 2>&1
note "tests: rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' $OUT/logs/tests.log | paste -sd' ')"
grep -E '^\[  FAILED|Failure' $OUT/logs/tests.log | head -20 >> $SUMMARY
wait
pk() {  # pk BIN ROUND TAG MODEL ARGS...
  local bin=$1 r=$2 tag=$3 m=$4; shift 4
  if [ $((SECONDS-t0)) -gt ${LIMIT:-260} ]; then note "skip $tag r$r (time)"; return; fi
  timeout 60 $bin bench -m $m --device cuda -r 3 --json --bandwidth 4800 "$@" 2>> $OUT/logs/polykv.err | grep '^{' | sed "s/^{/{\"round\":$r,\"tag\":\"$tag\",/" >> $OUT/polykv.jsonl
  note "$tag r$r ($((SECONDS-t0)) s): $(grep "\"round\":$r,\"tag\":\"$tag\"" $OUT/polykv.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]' | paste -sd' ')"
}
for m in $M $G; do
  b=$(basename $m .gguf)
  for arm in main h27; do
    bin=$P; [ $arm = main ] && bin=$B
    CUDA_INJECTION64_PATH=$PWD/build-gpu/lib/libpolykv_cuda_trace.so POLYKV_TRACE=/tmp/trace.csv \
      timeout 60 $bin bench -m $m --device cuda -ctk f16 -ctv f16 -d 0 -p 0 -n 32 -r 1 >/dev/null 2>>$OUT/logs/bench.err
    python3 scripts/cuda_trace_summary.py /tmp/trace.csv --skip 4 > $OUT/traces/trace-d0-$b-$arm.summary.txt 2>&1
    note "trace $b $arm: $(grep -E '^period' $OUT/traces/trace-d0-$b-$arm.summary.txt)"
  done
done
for r in 1 2; do
  a1=$B n1=main a2=$P n2=h27; [ $r = 2 ] && { a1=$P n1=h27 a2=$B n2=main; }
  for cfg in "$M f16 f16" "$G f16 f16" "$M q8_0 turbo3t"; do
    set -- $cfg; b=$(basename $1 .gguf)
    pk $a1 $r $n1-$b-tg-$2-$3 $1 -p 0 -n 128 -ctk $2 -ctv $3
    pk $a2 $r $n2-$b-tg-$2-$3 $1 -p 0 -n 128 -ctk $2 -ctv $3
  done
done
cd $OUT && tar cJf h30-logs.tar.xz logs && rm -rf logs; note "done at $((SECONDS-t0)) s"
