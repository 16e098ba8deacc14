#!/usr/bin/env bash
# 2026-12-06c call H20 (issue #9), with the session's last device minutes: facts for the next session, no code change.
# (1) bench --verify-k on synth llama-3.1-8b q4_K_M: verify steps of 2-8 columns still run one launch per part where
#     v has another type (the two-type kernel is one column only); their cost against q4_0-style one-type steps is
#     what a multi-column two-type kernel could win. (2) Nsight Compute of q4_K_M's q4_K mat-vec (the gate,up launch)
#     and q6_K mat-vec (ffn_down): in the H16 timeline q4_K reached ~79% of copy bandwidth, q6_K ~86%.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
mkdir -p $OUT/logs
M=/tmp/l8-q4_K_M.gguf
timeout 150 $P synth --shape llama-3.1-8b --type q4_K_M -o $M --threads 15 >>$OUT/logs/synth.log 2>&1
note "synth rc=$? at $((SECONDS-t0)) s"
timeout 60 $P bench -m $M --device cuda -ctk f16 -ctv f16 -d 0 --verify-k 1,2,4,8 -r 2 --json 2>>$OUT/logs/bench.err \
  | grep '^{' > $OUT/verify.jsonl
note "verify ($((SECONDS-t0)) s): $(head -c 600 $OUT/verify.jsonl)"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
timeout 90 $NCU --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy \
  -k 'regex:matvec_split_kernel' --launch-skip 200 --launch-count 6 --clock-control none --cache-control none \
  $P bench -m $M --device cuda -p 0 -n 8 -r 1 -ctk f16 -ctv f16 --bandwidth 3350 > $OUT/ncu-matvec.txt 2>&1
note "ncu rc=$? ($((SECONDS-t0)) s): $(grep -E 'matvec_split_kernel|DRAM Throughput|Memory Throughput|Achieved Occupancy' $OUT/ncu-matvec.txt | head -24 | paste -sd'|')"
cd $OUT && tar cJf h20-logs.tar.xz logs && rm -rf logs
note "done at $((SECONDS-t0)) s"
