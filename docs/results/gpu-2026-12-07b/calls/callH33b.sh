#!/usr/bin/env bash
# Call H33b (2026-12-07b; on H33's warm machine: its build and /tmp files): Nsight Compute on one decode token's
# MoE kernels of qwen3-30b-a3b q4_0 (gate+up, down, the router's mat-vec), serialized: what each kernel does
# alone (duration, DRAM throughput, stall reasons), to see where gate+up's 15 us a layer go.
source scripts/gpu-lib.sh
BIN=build-gpu SUMMARY=$OUT/summary.txt T=build-gpu/polykv_tests P=build-gpu/polykv
setup_gpu_libraries
t0=$SECONDS
M=/tmp/q3moe-q4_0.gguf
[ -s $M ] || { note "no $M (not the warm machine)"; exit 1; }
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
for k in moe_gate_up_act_kernel moe_down_sum_kernel matvec_float_regs_kernel; do
  timeout 150 $NCU --graph-profiling node -k regex:$k --launch-skip 60 --launch-count 2 --set full \
    $P bench -m $M --device cuda -ctk f16 -ctv f16 -d 0 -p 0 -n 4 -r 1 > $OUT/ncu-$k.txt 2>&1
  note "ncu $k rc=$? ($((SECONDS-t0)) s): $(grep -E '^ +(Duration|DRAM Throughput|Memory Throughput|Registers Per Thread|Achieved Occupancy) ' $OUT/ncu-$k.txt | head -5 | awk '{$1=$1};1' | paste -sd'|')"
done
