#!/usr/bin/env bash
# 2026-12-05 call Y3: (1) HybridAttentionCuda with the CPU reference on f32 scores (it failed in Y2 against the
# CPU's q8_0-rounded query) and the attention / model tests around it; (2) why `run` printed other tokens on the CPU
# than on CUDA for the ternary requantizations of the embedded model in Y2: the same prompt, 48 greedy tokens, on the
# embedded q8_0 model and each ternary file, CUDA against the CPU with its default scores and with POLYKV_ATTN_Q8=0,
# with the default KV (q8_0/turbo3t) and with f32/f32 KV; (3) TernaryCuda.ModelLogitsMatchTheCpu (new): the ternary
# requantizations on CUDA against the CPU backend, logits per row.
source scripts/gpu-lib.sh; call_setup
t0=$SECONDS
gtest_shards 4 150 'HybridAttentionCuda.*:ModelCuda*:CudaAttention*:GenerateCuda.*:TernaryCuda*:MatmulCuda.*'
grep -h '^  t[q]\|^  ptq\|worst relative' $OUT/shard*.log >> $SUMMARY
export POLYKV_CUDA_TERNARY=1
E=models/polykv-code-26m-q8_0.gguf
PROMPT=1,442,2180,7809,1494,7809,7794,285,7809,7794,285,858,267
for t in q8_0 tq2_0 tq1_0 ptq1_0; do
  F=/tmp/e-$t.gguf; [ $t = q8_0 ] && F=$E || $P quantize $E $F $t >>$OUT/quantize.log 2>&1
  for kv in "q8_0 turbo3t" "f32 f32"; do
    set -- $kv
    a=$(timeout 60 $P run -m $F --ids $PROMPT -n 48 --temp 0 -ctk $1 -ctv $2 --device cpu 2>>$OUT/run.err | md5sum | cut -c1-8)
    b=$(POLYKV_ATTN_Q8=0 timeout 60 $P run -m $F --ids $PROMPT -n 48 --temp 0 -ctk $1 -ctv $2 --device cpu 2>>$OUT/run.err | md5sum | cut -c1-8)
    c=$(timeout 60 $P run -m $F --ids $PROMPT -n 48 --temp 0 -ctk $1 -ctv $2 --device cuda 2>>$OUT/run.err | md5sum | cut -c1-8)
    note "run $t $1/$2: cpu $a, cpu f32-scores $b, cuda $c"
  done
done
cd $OUT && tar cJf y3-logs.tar.xz shard*.log run.err quantize.log 2>/dev/null && rm -f shard*.log
note "done at $((SECONDS-t0)) s"
