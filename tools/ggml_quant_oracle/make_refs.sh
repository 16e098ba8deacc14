#!/bin/sh
# Makes tests/data/quant/<type>_<row>.ggml.bin: ggml's own C quantize_row_<type>_ref of input_<row>.f32
# (and of kquant_input.f32, from make_kquant_input.py), for the types gguf-py cannot quantize (the
# k-quants), and prints the hashes of ggml's bytes over the block stream of tests/kquant_stream.h
# that tests/kquant_quantize_test.cpp expects. ggml-quants.c is compiled WITHOUT FMA (plain x86-64
# -O2, as llama.cpp's own ggml-base on x86-64): its k-quant scale searches accumulate sums whose
# rounding changes when the compiler fuses multiply-adds, and polykv's reference is the unfused form.
# usage: tools/ggml_quant_oracle/make_refs.sh <llama.cpp checkout>
#   (q6_K_a/b made with c392e5094dea; the rest with de3ff815ea7d, which gives q6_K_a/b's bytes too)
set -eu
LLAMA=$1
HERE=$(cd "$(dirname "$0")" && pwd)
DATA=$HERE/../../tests/data/quant
S=$LLAMA/ggml/src
TMP=$(mktemp -d)
gcc -O2 -std=gnu11 -I"$S" -I"$S/../include" -c "$S/ggml-quants.c" -o "$TMP/ggml-quants.o"
gcc -O2 -std=gnu11 -I"$S" -I"$S/../include" "$HERE/oracle_main.c" "$HERE/link_stubs.c" "$TMP/ggml-quants.o" -lm -o "$TMP/oracle"
gcc -O2 -std=gnu11 -I"$S" -I"$S/../include" -I"$HERE/../../tests" "$HERE/stream_hash.c" "$HERE/link_stubs.c" \
  "$TMP/ggml-quants.o" -lm -o "$TMP/stream_hash"
for t in q2_K q3_K q4_K q5_K q6_K; do
  for row in a b; do "$TMP/oracle" $t "$DATA/input_$row.f32" "$DATA/${t}_$row.ggml.bin"; done
  "$TMP/oracle" $t "$DATA/kquant_input.f32" "$DATA/${t}_kquant.ggml.bin"
  "$TMP/stream_hash" $t 1 4096
done
rm -rf "$TMP"
