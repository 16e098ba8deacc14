#!/usr/bin/env bash
# Call H33 (2026-12-07b): the three MoE decode changes of gpu-2026-12-07/router-regs-and-one-wave.patch, now
# applied, in ONE build, each with its switch, so every arm runs the same binary:
#   off    = POLYKV_CUDA_MOE_ONE_WAVE=0 POLYKV_CUDA_MATVEC_REGS=0 POLYKV_CUDA_DEFER_NORM=0 (main's behaviour)
#   new    = all three on;   wave0 / regs0 / defer0 = one of them off.
# Carry .gpucarry/build-gpu.tar.xz and .gpucarry/fixtures (qwen3moe + gptoss sets).
# 1. Tests: the new kernel against the stream kernel and the host emulation, the MoE tests and the MoE fixture
#    goldens, while synth makes the two files.
# 2. Timelines of qwen3-30b-a3b, off and new.
# 3. Decode at depth 0, f16/f16: off vs new (2 rounds interleaved, order reversed in round 2); round 3 each change off.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
mkdir -p $OUT/traces $OUT/logs
M=/tmp/q3moe-q4_0.gguf G=/tmp/gptoss-q4_0.gguf
OFF="POLYKV_CUDA_MOE_ONE_WAVE=0 POLYKV_CUDA_MATVEC_REGS=0 POLYKV_CUDA_DEFER_NORM=0"
[ -s $M ] || timeout 200 $P synth --shape qwen3-30b-a3b --type q4_0 -o $M --threads 8 > $OUT/logs/synth-q3.log 2>&1 &
[ -s $G ] || timeout 200 $P synth --shape gpt-oss-20b --type q4_0 -o $G --threads 8 > $OUT/logs/synth-gpt.log 2>&1 &
timeout 150 $T --gtest_filter='MatmulCuda.FloatRegsKernelSameBits:MatmulCuda.MatvecMatchesReferenceEveryTypeAndWidth:MatmulCuda.StreamKernelEverySplitBitExact:MatmulCuda.BatchInvariantBitForBit:DeferredNormCuda.*:*MoeV2Cuda*:*MoeModelCuda*:*GptOssCuda*:*MoeExpertsCuda*:*Qwen3Moe*Cuda*' --gtest_color=no > $OUT/tests.log 2>&1
note "tests: rc=$? ($((SECONDS-t0)) s) $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' $OUT/tests.log | paste -sd' ')"
grep -E '^\[  FAILED|Failure' $OUT/tests.log | head -20 >> $SUMMARY
wait
note "synth done ($((SECONDS-t0)) s): $(ls -la $M $G 2>&1 | awk '{print $5, $9}' | paste -sd' ')"
for m in ${TRACE_MODELS-$M}; do
  b=$(basename $m .gguf)
  for arm in new off; do
    env=""; [ $arm = off ] && env="$OFF"
    env $env CUDA_INJECTION64_PATH=$PWD/build-gpu/lib/libpolykv_cuda_trace.so POLYKV_TRACE=/tmp/trace.csv \
      timeout 60 $P bench -m $m --device cuda -ctk f16 -ctv f16 -d 0 -p 0 -n 32 -r 1 >/dev/null 2>>$OUT/logs/bench.err
    python3 scripts/cuda_trace_summary.py /tmp/trace.csv --skip 4 > $OUT/traces/trace-d0-$b-$arm.summary.txt 2>&1
    note "trace $b $arm: $(grep -E '^period' $OUT/traces/trace-d0-$b-$arm.summary.txt) | $(grep -E 'matvec_(stream|float_regs)_kernel<DecF32|rmsnorm_acts_cluster' $OUT/traces/trace-d0-$b-$arm.summary.txt | awk '{print $1, $3, $4}' | paste -sd' ')"
  done
done
pk() {  # pk ROUND TAG MODEL [ENV...]
  if [ $((SECONDS-t0)) -gt ${LIMIT:-430} ]; then note "skip $2 r$1 (time)"; return; fi
  local r=$1 tag=$2 m=$3; shift 3
  env "$@" timeout 60 $P bench -m $m --device cuda -r 3 --json -p 0 -n 128 -ctk f16 -ctv f16 2>>$OUT/logs/polykv.err | grep '^{' | sed "s/^{/{\"round\":$r,\"tag\":\"$tag\",/" >> $OUT/polykv.jsonl
  note "$tag r$r ($((SECONDS-t0)) s): $(grep "\"round\":$r,\"tag\":\"$tag\"" $OUT/polykv.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]')"
}
for r in 1 2; do
  for m in $G $M; do
    b=$(basename $m .gguf)
    if [ $r = 1 ]; then pk $r off-$b $m $OFF; pk $r new-$b $m; else pk $r new-$b $m; pk $r off-$b $m $OFF; fi
  done
done
for m in $M $G; do
  b=$(basename $m .gguf)
  pk 3 regs0-$b $m POLYKV_CUDA_MATVEC_REGS=0; pk 3 defer0-$b $m POLYKV_CUDA_DEFER_NORM=0
  [ $m = $G ] && pk 3 wave0-$b $m POLYKV_CUDA_MOE_ONE_WAVE=0
  pk 3 new-$b $m
done
# The default KV (q8_0/turbo3t) on qwen3-30b-a3b: off vs new, 2 rounds.
pkq() {  # pkq ROUND TAG [ENV...]
  if [ $((SECONDS-t0)) -gt ${LIMIT:-430} ]; then note "skip $2 r$1 (time)"; return; fi
  local r=$1 tag=$2; shift 2
  env "$@" timeout 60 $P bench -m $M --device cuda -r 3 --json -p 0 -n 128 -ctk q8_0 -ctv turbo3t 2>>$OUT/logs/polykv.err | grep '^{' | sed "s/^{/{\"round\":$r,\"tag\":\"$tag\",/" >> $OUT/polykv.jsonl
  note "$tag r$r ($((SECONDS-t0)) s): $(grep "\"round\":$r,\"tag\":\"$tag\"" $OUT/polykv.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]')"
}
pkq 1 off-q3moe-q4_0-q8t $OFF; pkq 1 new-q3moe-q4_0-q8t; pkq 2 new-q3moe-q4_0-q8t; pkq 2 off-q3moe-q4_0-q8t $OFF
note "benches done ($((SECONDS-t0)) s)"
# Nsight Compute (what H33b does on a warm machine): one decode token's MoE kernels of qwen3-30b-a3b, serialized.
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
for k in moe_gate_up_act_kernel moe_down_sum_kernel matvec_float_regs_kernel; do
  if [ $((SECONDS-t0)) -gt ${NCU_LIMIT:-480} ]; then note "skip ncu $k (time)"; continue; fi
  timeout 100 $NCU --graph-profiling node -k regex:$k --launch-skip 60 --launch-count 2 --set full \
    $P bench -m $M --device cuda -ctk f16 -ctv f16 -d 0 -p 0 -n 4 -r 1 > $OUT/ncu-$k.txt 2>&1
  note "ncu $k rc=$? ($((SECONDS-t0)) s): $(grep -E '^ +(Duration|DRAM Throughput|Memory Throughput|Registers Per Thread|Achieved Occupancy) ' $OUT/ncu-$k.txt | head -5 | awk '{$1=$1};1' | paste -sd'|')"
done
xz -9 $OUT/ncu-*.txt 2>/dev/null
note "done ($((SECONDS-t0)) s)"
