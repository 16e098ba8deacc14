#!/usr/bin/env bash
# The AVX2 / AVX-VNNI packed kernels with their new software prefetch (k-quants, packed_kquant_avx2.h: 2 records ahead,
# spread over the sub-blocks; q4_0 / q8_0 / mxfp4, packed_kernels_avx2.h: 16 blocks ahead; first half's pass only)
# against none (POLYKV_PACKED_PF=0: the code before 2026-12-05e issued no prefetch at all), forced to AVX2 on an
# AVX-512 host (POLYKV_ISA=avx2, so the AVX-VNNI variant), the matmuls of a llama-3.2-1b step
# (bench/verify_matmul_bench.cpp, built as its header says), 2 threads, alternated.
#   k-quants (avx2_pf_ab.txt):    ROUNDS=3 BIN=/tmp/vmb2 ./avx2_pf_ab.sh
#   q4_0 / q8_0 (avx2_q40_pf_ab.txt): ROUNDS=3 BIN=/tmp/vmb4 TYPES="q4_0 q8_0" ./avx2_pf_ab.sh
# (/tmp/vmb2 was built before the q4_0 / q8_0 prefetch, /tmp/vmb4 after; either measures both with POLYKV_PACKED_PF.)
set -euo pipefail
BIN=${BIN:-/tmp/vmb2}
for r in $(seq 1 "${ROUNDS:-3}"); do
  for ty in ${TYPES:-q4_K q5_K q6_K}; do
    for pf in 0 default; do
      e="POLYKV_ISA=avx2"; [ $pf = 0 ] && e="$e POLYKV_PACKED_PF=0"
      echo "== round $r $ty pf=$pf"
      env $e "$BIN" --type $ty --threads 2 --rounds 8 --steps 1 2>&1 | tail -5
    done
  done
done
