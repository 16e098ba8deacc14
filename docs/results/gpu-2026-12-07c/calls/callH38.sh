#!/usr/bin/env bash
# Run as call H39 of 2026-12-07d (docs/results/gpu-2026-12-07d/calls/callH39.sh, with dense diagnostics added).
# Call H38 (written 2026-12-07c, not run: for the next session): the routing by ranks where it counts the most,
# qwen3.5-35b-a3b (256 experts, k = 8: one thread an expert, 256 compares each) against the rounds
# (POLYKV_CUDA_MOE_RANK_ROUTE=0), and qwen3-30b-a3b again as the control; decode at depth 0, f16/f16, 2 rounds
# interleaved, order reversed in round 2. ~4 device minutes (the qwen3.5 file is ~20 GB; synth ~2 min).
# Carry .gpucarry/build-gpu.tar.xz (a build of main) and, for the tests, .gpucarry/fixtures with qwen35moe.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
mkdir -p $OUT/logs
Q=/tmp/q35moe-q4_0.gguf M=/tmp/q3moe-q4_0.gguf
[ -s $Q ] || timeout 300 $P synth --shape qwen3.5-35b-a3b --type q4_0 -o $Q --threads 8 > $OUT/logs/synth-q35.log 2>&1 &
[ -s $M ] || timeout 300 $P synth --shape qwen3-30b-a3b --type q4_0 -o $M --threads 6 > $OUT/logs/synth-q3.log 2>&1 &
timeout 150 $T --gtest_filter='MoeCuda.*:*MoeV2Cuda*:*HybridCuda*:*HybridMtpCuda*' --gtest_color=no > $OUT/tests.log 2>&1
note "tests: rc=$? ($((SECONDS-t0)) s) $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' $OUT/tests.log | paste -sd' ')"
wait
note "synth done ($((SECONDS-t0)) s)"
pk() {  # pk ROUND TAG MODEL [ENV...]
  if [ $((SECONDS-t0)) -gt ${LIMIT:-330} ]; then note "skip $2 r$1 (time)"; return; fi
  local r=$1 tag=$2 m=$3; shift 3
  env "$@" timeout 90 $P bench -m $m --device cuda -r 3 --json -p 0 -n 128 -ctk f16 -ctv f16 2>>$OUT/logs/polykv.err | grep '^{' | sed "s/^{/{\"round\":$r,\"tag\":\"$tag\",/" >> $OUT/polykv.jsonl
  note "$tag r$r ($((SECONDS-t0)) s): $(grep "\"round\":$r,\"tag\":\"$tag\"" $OUT/polykv.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]')"
}
for r in 1 2; do
  for m in $Q $M; do
    b=$(basename $m .gguf)
    if [ $r = 1 ]; then pk $r new-$b $m; pk $r rank0-$b $m POLYKV_CUDA_MOE_RANK_ROUTE=0
    else pk $r rank0-$b $m POLYKV_CUDA_MOE_RANK_ROUTE=0; pk $r new-$b $m; fi
  done
done
note "done ($((SECONDS-t0)) s)"
