#!/usr/bin/env bash
# Call H32 (2026-12-07): (a) the one-wave rule for routing inside the gate+up launch (one-wave-route.patch of
# 2026-12-06g), (b) the small float mat-vec (matmul_cuda_small.cu: a MoE router's rows in registers, loaded
# before the PDL wait; POLYKV_CUDA_MATVEC_REGS=0 turns it off) and (c) deferred norms no longer turned off by a
# small f32 matrix (the router), so MoE models defer their attention norms (POLYKV_CUDA_DEFER_NORM=0: as before). Carry build-gpu.tar.xz (both changes), .gpucarry/polykv-main.xz (main edd40f0) and
# .gpucarry/fixtures (qwen3moe + gpt-oss sets).
# 1. Tests: the new kernel against the stream kernel and the host emulation, the mat-vec tests it now takes,
#    the MoE tests (MoeV2Cuda's three arms) and the MoE fixture goldens, while synth makes the two files.
# 2. Timelines (new build) of qwen3-30b-a3b and gpt-oss-20b.
# 3. Decode at depth 0, f16/f16: main vs new vs new with (b) off (regs0) vs new with (c) off (defer0); 2 rounds
#    interleaved, the order reversed in round 2.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
mkdir -p $OUT/traces $OUT/logs
xz -dc .gpucarry/polykv-main.xz > build-gpu/polykv-main && chmod +x build-gpu/polykv-main
B=build-gpu/polykv-main
M=/tmp/q3moe-q4_0.gguf G=/tmp/gptoss-q4_0.gguf
[ -s $M ] || timeout 200 $P synth --shape qwen3-30b-a3b --type q4_0 -o $M --threads 8 > $OUT/logs/synth-q3.log 2>&1 &
[ -s $G ] || timeout 200 $P synth --shape gpt-oss-20b --type q4_0 -o $G --threads 8 > $OUT/logs/synth-gpt.log 2>&1 &
timeout 150 $T --gtest_filter='MatmulCuda.FloatRegsKernelSameBits:MatmulCuda.MatvecMatchesReferenceEveryTypeAndWidth:MatmulCuda.StreamKernelEverySplitBitExact:MatmulCuda.BatchInvariantBitForBit:*MoeV2Cuda*:*MoeModelCuda*:*GptOssCuda*:*MoeExpertsCuda*:*Qwen3Moe*Cuda*' --gtest_color=no > $OUT/tests.log 2>&1
note "tests: rc=$? ($((SECONDS-t0)) s) $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' $OUT/tests.log | paste -sd' ')"
grep -E '^\[  FAILED|Failure' $OUT/tests.log | head -20 >> $SUMMARY
wait
note "synth done ($((SECONDS-t0)) s): $(ls -la $M $G 2>&1 | awk '{print $5, $9}' | paste -sd' ')"
for m in ${TRACE_MODELS-}; do
  b=$(basename $m .gguf)
  for arm in new; do
    env=""; [ $arm = regs0 ] && env="POLYKV_CUDA_MATVEC_REGS=0"
    env $env CUDA_INJECTION64_PATH=$PWD/build-gpu/lib/libpolykv_cuda_trace.so POLYKV_TRACE=/tmp/trace.csv \
      timeout 60 $P bench -m $m --device cuda -ctk f16 -ctv f16 -d 0 -p 0 -n 32 -r 1 >/dev/null 2>>$OUT/logs/bench.err
    python3 scripts/cuda_trace_summary.py /tmp/trace.csv --skip 4 > $OUT/traces/trace-d0-$b-$arm.summary.txt 2>&1
    note "trace $b $arm: $(grep -E '^period' $OUT/traces/trace-d0-$b-$arm.summary.txt) | $(grep -E 'matvec_(stream|float_regs)_kernel<DecF32' $OUT/traces/trace-d0-$b-$arm.summary.txt | awk '{print $1, $3, $4}' | paste -sd' ')"
  done
done
pk() {  # pk BIN ROUND TAG MODEL [ENV]
  if [ $((SECONDS-t0)) -gt ${LIMIT:-400} ]; then note "skip $3 r$2 (time)"; return; fi
  env $5 timeout 60 $1 bench -m $4 --device cuda -r 3 --json -p 0 -n 128 -ctk f16 -ctv f16 2>>$OUT/logs/polykv.err | grep '^{' | sed "s/^{/{\"round\":$2,\"tag\":\"$3\",/" >> $OUT/polykv.jsonl
  note "$3 r$2 ($((SECONDS-t0)) s): $(grep "\"round\":$2,\"tag\":\"$3\"" $OUT/polykv.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]')"
}
# Rounds 1-2: main vs new on both files (order reversed in round 2); round 3, if time is left: each change off.
for r in 1 2; do
  for m in $G $M; do
    b=$(basename $m .gguf)
    if [ $r = 1 ]; then pk $B $r main-$b $m; pk $P $r new-$b $m; else pk $P $r new-$b $m; pk $B $r main-$b $m; fi
  done
done
for m in $M $G; do
  b=$(basename $m .gguf)
  pk $P 3 regs0-$b $m POLYKV_CUDA_MATVEC_REGS=0; pk $P 3 defer0-$b $m POLYKV_CUDA_DEFER_NORM=0; pk $P 3 new-$b $m
done
note "done ($((SECONDS-t0)) s)"
