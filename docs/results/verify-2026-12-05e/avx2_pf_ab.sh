#!/usr/bin/env bash
# The AVX2 / AVX-VNNI packed k-quant kernels (packed_kquant_avx2.h) with their new software prefetch (default: 2
# records ahead, 5-7 lines a sub-block, first half's pass only) against none (POLYKV_PACKED_PF=0: the code before
# 2026-12-05e issued no prefetch at all), forced to AVX2 on an AVX-512 host (POLYKV_ISA=avx2), the matmuls of a
# llama-3.2-1b step (bench/verify_matmul_bench.cpp, built as its header says, here /tmp/vmb2), 2 threads.
set -euo pipefail
BIN=${BIN:-/tmp/vmb2}
for r in $(seq 1 "${ROUNDS:-3}"); do
  for ty in q4_K q5_K q6_K; do
    for pf in 0 default; do
      e="POLYKV_ISA=avx2"; [ $pf = 0 ] && e="$e POLYKV_PACKED_PF=0"
      echo "== round $r $ty pf=$pf"
      env $e "$BIN" --type $ty --threads 2 --rounds 8 --steps 1 2>&1 | tail -5
    done
  done
done
