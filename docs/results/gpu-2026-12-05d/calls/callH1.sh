#!/usr/bin/env bash
# 2026-12-05d call H1: the q4_K split head re-ordered for the lanes (Split<DecQ4_K>: each lane pair's two 6-bit
# scales and mins in one 24-bit field, no branchy ggml unpacking) -- every CUDA GPU test on this build (the
# embedded model carried; the draft model and the MTP head stayed behind for the 64 MiB carry limit), then the
# per-matrix mat-vec benchmark (MatvecSplitCudaBench: the stream kernel on ggml rows against the split kernel).
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
gtest_shards 8 230 '*Cuda*:*cuda*:-*Emulation*:*DISABLED*:SpecCuda.GreedyIdentityNgramDraftMtp'
note "tests done at $((SECONDS-t0)) s"
timeout 120 $T --gtest_filter='MatvecSplitCudaBench.DISABLED_OldVsSplit' --gtest_also_run_disabled_tests --gtest_color=no \
  > $OUT/matvec_bench.txt 2>&1
note "matvec bench rc=$? at $((SECONDS-t0)) s"
grep -E "^(type|q4_K|q4_0|q6_K|q8_0|device)" $OUT/matvec_bench.txt >> $OUT/summary.txt
cd $OUT && tar cJf h1-logs.tar.xz shard*.log && rm -f shard*.log
note "done at $((SECONDS-t0)) s"
