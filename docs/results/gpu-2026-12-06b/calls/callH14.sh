#!/usr/bin/env bash
# Written 2026-12-06b for the next session's device (this session's device time ran out after H13).
# Carry two builds (no models needed; ~48 MB with the source): .gpucarry/build-gpu.tar.xz = main b9117c2 or later
# (the rolled Viterbi forms, POLYKV_CUDA_KV_VITERBI=rolled|rolledall, and CudaBackendTest.MeasuresItsCopyBandwidth),
# .gpucarry/build-gpu-base.tar.xz = main e76c764 (before
# them: its store kernel holds fewer forms, so its layout is main's as measured in H11-H13). The call needs ~7 min.
# Hypothesis (docs/CUDA_DECODE.md "Weights evict first"): the decode KV store of turbo3t V waits for its
# instructions (H11: 12 of 26 stall samples no_inst, 9 of them at 256-byte line starts, also inside the unrolled
# 7 KB Viterbi word loop; H12: the store 18.7 vs 10.9 us a layer depending on how L2 was churned).
# (0) the store's GPU tests with each rolled form: the GPU's bytes = the CPU's (CudaKvStore.*), then the default;
# (1) decode A/B/C/D, synth llama-3.1-8b q4_0, depth 0, -p 0 -n 128 -r 3, 3 rounds, order rotated each round:
#     base (e76c764's binary), unrolled (the new binary's default), rolled, rolledall; q8_0/turbo3t and
#     turbo3t/turbo3t; depth 32768 q8_0/turbo3t one round;
# (2) in-graph timelines of each arm (q8_0/turbo3t, depth 0): the store's exposed us;
# (3) Nsight Compute of the store, each arm, with --warp-sampling-interval 0 (H11's default interval gave 26
#     samples): stall reasons per SASS line (scripts/ncu_stalls.py), to settle instruction fetch vs the rest.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
mkdir -p /tmp/base && tar xJf .gpucarry/build-gpu-base.tar.xz -C /tmp/base
PB=/tmp/base/build-gpu/polykv
[ -x $PB ] || note "base build missing: the base arm is skipped"
mkdir -p $OUT/logs $OUT/traces
timeout 300 $P synth --shape llama-3.1-8b --type q4_0 -o /tmp/l8-q4_0.gguf --threads 12 >>$OUT/logs/synth.log 2>&1 &
SYN=$!
for form in rolled rolledall; do
  POLYKV_CUDA_KV_VITERBI=$form timeout 120 $T --gtest_filter='CudaKvStore.*:KvEncodeWarpEmulation*' --gtest_color=no \
    > $OUT/logs/tests-$form.log 2>&1
  note "store tests, $form: rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/logs/tests-$form.log | paste -sd' ')"
done
timeout 120 $T --gtest_filter='CudaKvStore.*:CudaBackendTest.MeasuresItsCopyBandwidth' --gtest_color=no \
  > $OUT/logs/tests-default.log 2>&1
note "store tests, default: rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/logs/tests-default.log | paste -sd' ')"
wait $SYN
ab() {  # ab ARM ROUND CTK CTV DEPTH N REPS
  local arm=$1 r=$2 k=$3 v=$4 d=$5 n=$6 reps=$7
  if [ $((SECONDS-t0)) -gt 480 ]; then note "skip $arm $k/$v d$d r$r (time)"; return; fi
  local form= bin=$P
  case $arm in rolled | rolledall) form=$arm ;; base) bin=$PB; [ -x $bin ] || return ;; esac
  POLYKV_CUDA_KV_VITERBI=$form timeout 90 $bin bench -m /tmp/l8-q4_0.gguf --device cuda -ctk $k -ctv $v -d $d -p 0 -n $n \
    -r $reps --bandwidth 3350 --json 2>>$OUT/logs/bench.err | grep '^{' |
    sed "s/^{/{\"arm\":\"$arm\",\"round\":$r,/" >>$OUT/ab.jsonl
  note "$k/$v d$d $arm r$r ($((SECONDS-t0)) s): $(tail -1 $OUT/ab.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]' | tr -d '"')"
}
for r in 1 2 3; do
  arms="base unrolled rolled rolledall"
  [ $r = 2 ] && arms="rolledall rolled unrolled base"
  [ $r = 3 ] && arms="rolled base rolledall unrolled"
  for kv in "q8_0 turbo3t" "turbo3t turbo3t"; do
    for arm in $arms; do ab $arm $r $kv 0 128 3; done
  done
done
for arm in base unrolled rolled rolledall; do ab $arm 1 q8_0 turbo3t 32768 32 2; done
for arm in base unrolled rolled rolledall; do
  form= bin=$P
  case $arm in rolled | rolledall) form=$arm ;; base) bin=$PB; [ -x $bin ] || continue ;; esac
  CUDA_INJECTION64_PATH=$PWD/build-gpu/lib/libpolykv_cuda_trace.so POLYKV_TRACE=/tmp/trace-$arm.csv POLYKV_CUDA_KV_VITERBI=$form \
    timeout 60 $bin bench -m /tmp/l8-q4_0.gguf --device cuda -ctk q8_0 -ctv turbo3t -d 0 -p 0 -n 32 -r 1 --bandwidth 3350 \
    >/dev/null 2>>$OUT/logs/bench.err
  python3 scripts/cuda_trace_summary.py /tmp/trace-$arm.csv --skip 4 > $OUT/traces/trace-d0-$arm.summary.txt 2>&1
  note "trace $arm: $(grep -E 'kv_store_kernel|^period' $OUT/traces/trace-d0-$arm.summary.txt | head -2 | paste -sd' ')"
done
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
for arm in base rolled rolledall; do
  if [ $((SECONDS-t0)) -gt 540 ]; then note "skip ncu $arm (time)"; continue; fi
  form= bin=$P
  case $arm in rolled | rolledall) form=$arm ;; base) bin=$PB; [ -x $bin ] || continue ;; esac
  POLYKV_CUDA_KV_VITERBI=$form timeout 60 $NCU --section WarpStateStats --section SourceCounters --import-source yes \
    --warp-sampling-interval 0 --clock-control none --cache-control none -k 'regex:kv_store' --launch-skip 40 \
    --launch-count 1 --export /tmp/kv-$arm -f $bin bench -m /tmp/l8-q4_0.gguf --device cuda -p 16 -n 3 -r 1 \
    -ctk q8_0 -ctv turbo3t --bandwidth 3350 > $OUT/logs/ncu-$arm.log 2>&1
  $NCU --import /tmp/kv-$arm.ncu-rep --page source --csv --print-source sass > /tmp/kv-$arm.csv 2>/dev/null
  xz -9 -T4 -c /tmp/kv-$arm.csv > $OUT/kv-sass-$arm.csv.xz
  python3 scripts/ncu_stalls.py /tmp/kv-$arm.csv kv_store 30 > $OUT/stalls-$arm.txt 2>&1
  note "ncu $arm: $(grep -E 'stall samples|no_inst' $OUT/stalls-$arm.txt | head -3 | paste -sd' ')"
done
cd $OUT && tar cJf h14-logs.tar.xz logs traces && rm -rf logs traces
note "done at $((SECONDS-t0)) s"
