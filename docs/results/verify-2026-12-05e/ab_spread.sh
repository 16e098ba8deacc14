#!/usr/bin/env bash
# q4_K packed kernel (AVX-512): the record's 36 prefetches in a burst at its start (main before 2026-12-05e) against
# 5 a sub-block (the new default), matmuls of one llama-3.2-1b step (bench/verify_matmul_bench.cpp), 2 threads,
# interleaved arm by arm, ROUNDS alternations of 12 rounds x 1 step each.
# The binary: the experiment build (q4k_experiments.patch applied to the commit before, POLYKV_Q4K_PF_SPREAD=0 the
# burst, =1 the spread; the patch's POLYKV_Q4K_CMAJOR and =3 arms were tried and dropped), compiled as the bench's
# header says: g++ -std=c++20 -O2 -Isrc bench/verify_matmul_bench.cpp build-cpu/libpolykv_lib.a ... -o /tmp/vmb-exp
set -euo pipefail
BIN=${BIN:-/tmp/vmb-exp}
ROUNDS=${ROUNDS:-5}
for r in $(seq 1 "$ROUNDS"); do
  for s in 0 1; do
    echo "== round $r spread=$s"
    POLYKV_Q4K_PF_SPREAD=$s "$BIN" --type q4_K --threads 2 --rounds 12 --steps 1 2>&1 | tail -5
  done
done
