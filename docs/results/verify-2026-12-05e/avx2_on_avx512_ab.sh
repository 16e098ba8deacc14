#!/usr/bin/env bash
# q5_K / q6_K on an AVX-512 machine: the AVX-VNNI packed kernels (with their new prefetch; the default since
# 2026-12-05e) against the AVX-512 row kernels (POLYKV_PACKED_AVX2_ON_AVX512=0, main before), the matmuls of a
# llama-3.2-1b step (bench/verify_matmul_bench.cpp, built as its header says, here /tmp/vmb3), 2 threads, alternated.
set -euo pipefail
BIN=${BIN:-/tmp/vmb3}
for r in $(seq 1 "${ROUNDS:-3}"); do
  for ty in q5_K q6_K; do
    for on in 0 1; do
      echo "== round $r $ty avx2_on_avx512=$on"
      POLYKV_PACKED_AVX2_ON_AVX512=$on "$BIN" --type $ty --threads 2 --rounds 8 --steps 1 2>&1 | tail -5
    done
  done
done
