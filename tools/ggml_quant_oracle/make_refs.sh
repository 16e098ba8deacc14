#!/bin/sh
# Makes tests/data/quant/<type>_<row>.ggml.bin: ggml's own C quantize_row_<type>_ref of input_<row>.f32,
# for the types gguf-py cannot quantize (the k-quants). ggml-quants.c is compiled WITHOUT FMA
# (plain x86-64 -O2): its k-quant scale searches accumulate sums whose rounding changes when the
# compiler fuses multiply-adds, and polykv's reference is the unfused form.
# usage: tools/ggml_quant_oracle/make_refs.sh <llama.cpp checkout>   (made with c392e5094dea)
set -eu
LLAMA=$1
HERE=$(cd "$(dirname "$0")" && pwd)
DATA=$HERE/../../tests/data/quant
S=$LLAMA/ggml/src
TMP=$(mktemp -d)
gcc -O2 -std=gnu11 -I"$S" -I"$S/../include" -c "$S/ggml-quants.c" -o "$TMP/ggml-quants.o"
gcc -O2 -std=gnu11 -I"$S" -I"$S/../include" "$HERE/oracle_main.c" "$HERE/link_stubs.c" "$TMP/ggml-quants.o" -lm -o "$TMP/oracle"
for t in q6_K; do
  for row in a b; do "$TMP/oracle" $t "$DATA/input_$row.f32" "$DATA/${t}_$row.ggml.bin"; done
done
rm -rf "$TMP"
