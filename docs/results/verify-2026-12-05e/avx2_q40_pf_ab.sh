#!/usr/bin/env bash
# The AVX2 / AVX-VNNI packed q4_0 / q8_0 kernels (packed_kernels_avx2.h) with their new software prefetch (16 blocks
# ahead, first half's pass only) against none (POLYKV_PACKED_PF=0, the code before 2026-12-05e), forced to AVX2 on an
# AVX-512 host (POLYKV_ISA=avx2), the matmuls of a llama-3.2-1b step (bench/verify_matmul_bench.cpp built as its
# header says, here /tmp/vmb4), 2 threads, alternated.
set -euo pipefail
BIN=${BIN:-/tmp/vmb4}
for r in $(seq 1 "${ROUNDS:-3}"); do
  for ty in q4_0 q8_0; do
    for pf in 0 default; do
      e="POLYKV_ISA=avx2"; [ $pf = 0 ] && e="$e POLYKV_PACKED_PF=0"
      echo "== round $r $ty pf=$pf"
      env $e "$BIN" --type $ty --threads 2 --rounds 8 --steps 1 2>&1 | tail -5
    done
  done
done
