#!/usr/bin/env bash
# 2026-12-05c call G1: the attention kernels write the o projection's activations (POLYKV_CUDA_ATTN_ACTS, new).
# Every CUDA GPU test (the embedded model carried; the draft model, the MTP head and the fixtures stayed behind
# for the 64 MiB carry limit: calls G2 / G3 run the fixture goldens), then decode on synth llama-3.1-8b q4_0, POLYKV_CUDA_ATTN_ACTS=0 against the default,
# interleaved run by run: depth 0 (3 KV pairs, 3 rounds), depth 32768 (2 KV pairs, 2 rounds), 131072 (1 round),
# and one in-graph timeline of each setting at depth 0, q8_0/turbo3t.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
gtest_shards 8 230 '*Cuda*:*cuda*:-*Emulation*:*DISABLED*:SpecCuda.GreedyIdentityNgramDraftMtp'
grep -h "SKIPPED \]" $OUT/shard*.log | sort -u | head -30 >> $OUT/skipped.txt
grep -h "max |dlogprob|\|rel L2 to\|top-1 differs" $OUT/shard*.log > $OUT/golden.txt
note "tests done at $((SECONDS-t0)) s"
timeout 120 $P synth --shape llama-3.1-8b --type q4_0 -o /tmp/l8-q4_0.gguf --threads 16 >>$OUT/synth.log 2>&1 || note "synth failed"
bench() {  # bench SETTING ROUND DEPTH K V
  local s=$1 r=$2 d=$3 k=$4 v=$5 tmo=60
  [ "$d" -gt 0 ] && tmo=120
  env POLYKV_CUDA_ATTN_ACTS=$s timeout $tmo $P bench -m /tmp/l8-q4_0.gguf --device cuda -ctk $k -ctv $v -d $d -p 0 -n 128 -r 3 \
    --bandwidth 4240 --json 2>>$OUT/bench.err | grep '^{' | sed "s/^{/{\"attn_acts\":$s,\"round\":$r,/" >>$OUT/ab.jsonl
  note "d$d $k/$v acts=$s r$r ($((SECONDS-t0)) s): $(tail -1 $OUT/ab.jsonl | grep -oE '"decode_tok_s_reps":\[[^]]*\]')"
}
for r in 1 2 3; do
  for kv in "f16 f16" "q8_0 q8_0" "q8_0 turbo3t"; do
    for s in 0 1; do bench $s $r 0 $kv; done
  done
done
for r in 1 2; do
  for kv in "q8_0 turbo3t" "q8_0 q8_0"; do
    for s in 1 0; do bench $s $r 32768 $kv; done
  done
done
for s in 0 1; do bench $s 1 131072 q8_0 turbo3t; done
for s in 0 1; do
  CUDA_INJECTION64_PATH=build-gpu/lib/libpolykv_cuda_trace.so POLYKV_TRACE=$OUT/trace-d0-acts$s.csv POLYKV_CUDA_ATTN_ACTS=$s \
    timeout 60 $P bench -m /tmp/l8-q4_0.gguf --device cuda -ctk q8_0 -ctv turbo3t -d 0 -p 0 -n 32 -r 1 >/dev/null 2>>$OUT/bench.err
  python3 scripts/cuda_trace_summary.py $OUT/trace-d0-acts$s.csv --skip 4 > $OUT/trace-d0-acts$s.summary.txt 2>&1
  xz -9 $OUT/trace-d0-acts$s.csv
done
cd $OUT && tar cJf g1-logs.tar.xz shard*.log synth.log bench.err 2>/dev/null && rm -f shard*.log
note "done at $((SECONDS-t0)) s"
