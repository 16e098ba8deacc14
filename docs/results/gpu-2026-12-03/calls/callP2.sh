#!/usr/bin/env bash
# 2026-12-03 call P2, main 7750b82+ (the chunked GPU delta rule): (1) the Gated DeltaNet and hybrid GPU tests (the new
# GdnCuda.ChunkedMatchesTokenByToken among them); (2) the one-layer speed test, chunked and token by token; (3) the
# first figures of a hybrid on the GPU: synth qwen3.5-9b q4_0, prefill pp512 / pp4096 and decode at depth 0, KV
# q8_0/turbo3t, the chunked delta rule (default) against POLYKV_CUDA_GDN=tokens, interleaved, 2 rounds; (4) a kernel
# timeline of one pp4096 prefill each way.
source scripts/gpu-lib.sh; call_setup
H=/tmp/qwen3.5-9b-q4_0.gguf; t0=$SECONDS
( $P synth --shape qwen3.5-9b --type q4_0 -o $H --threads 8 > /dev/null 2>&1 ) &
gtest_shards 4 120 '*Gdn*:*Hybrid*:-*DISABLED*:*Speed*:*Bench*:*Emulation*'
timeout 60 $T --gtest_also_run_disabled_tests --gtest_filter='GdnCuda.DISABLED_*' > $OUT/gdn-speed.log 2>&1
grep -E '^(decode|prefill)' $OUT/gdn-speed.log >> $SUMMARY
wait
note "synth done at $((SECONDS-t0)) s; $(ls -la $H | awk '{print $5}') bytes"
B="--device cuda --json --bandwidth 4240"
for round in 1 2; do
  for p in 512 4096; do
    for v in chunked tokens; do
      e=; [ $v = tokens ] && e=POLYKV_CUDA_GDN=tokens
      env $e timeout 60 $P bench -m $H $B -p $p -n 64 -r 2 -ctk q8_0 -ctv turbo3t 2>>$OUT/bench.err | grep '^{' |
        sed "s/^{/{\"variant\":\"$v\",/" >> $OUT/hybrid.jsonl
      note "qwen3.5-9b pp$p $v ($((SECONDS-t0)) s): $(tail -1 $OUT/hybrid.jsonl | grep -oE '"(prefill|decode)_tok_s_reps":\[[0-9.,]+\]' | paste -sd' ')"
    done
  done
done
for v in chunked tokens; do
  e=; [ $v = tokens ] && e=POLYKV_CUDA_GDN=tokens
  env $e CUDA_INJECTION64_PATH=$PWD/build-gpu/lib/libpolykv_cuda_trace.so POLYKV_TRACE=$OUT/t.csv timeout 60 \
    $P bench -m $H $B -p 4096 -n 0 -r 1 -ctk q8_0 -ctv turbo3t >/dev/null 2>>$OUT/bench.err
  python3 scripts/cuda_trace_totals.py $OUT/t.csv --top 30 > $OUT/trace-pp4096-$v.txt 2>&1; rm -f $OUT/t.csv
  note "trace pp4096 $v:"; head -8 $OUT/trace-pp4096-$v.txt >> $SUMMARY
done
note "done at $((SECONDS-t0)) s"
grep -i "error" $OUT/bench.err | sort | uniq -c | head -5 >> $SUMMARY
cd $OUT && tar cJf logs.tar.xz shard*.log bench.err gdn-speed.log && rm -f shard*.log bench.err gdn-speed.log
