#!/usr/bin/env bash
# Quality of every K/V cache configuration on the trained fixture model (docs/QUALITY.md):
#   perplexity and KL divergence against the unquantized (f32 KV) run over ppl_dev (16 rows x 2048),
#   and needle retrieval over needle_dev (144 cases).
# Usage: bench/quality.sh POLYKV_BINARY FIXTURES_DIR OUT_DIR [JOBS] [THREADS_PER_JOB]
# Writes one JSON file per run into OUT_DIR; runs JOBS evaluations at a time. MODES (default
# "ppl kld needle") picks the kinds of run; EXTRA_CONFIGS / EXTRA_NEEDLE add K:V:K_EQ entries.
set -euo pipefail
bin=$1 fx=$2 out=$3 jobs=${4:-1} threads=${5:-0}
model=$fx/models/trained/trained_llama.gguf
ids=$fx/models/trained/ppl_dev_ids.i32
cases=$fx/models/trained/needle_dev.jsonl
mkdir -p "$out"

# name | command arguments
runs=()
for kv in f32:f32 f16:f16; do
  k=${kv%%:*} v=${kv##*:}
  runs+=("ppl_${k}_${v}|eval ppl -m $model --ids $ids -c 2048 -ctk $k -ctv $v")
done
for cfg in f16:f16: q8_0:q8_0: q8_0:q4_0: q4_0:q4_0: q8_0:turbo4t: q8_0:turbo4: q8_0:turbo3t: q8_0:turbo3: \
           q8_0:turbo2t: q8_0:turbo2: turbo4t:turbo4t: turbo4:turbo4: turbo3t:turbo3t: turbo3:turbo3: \
           turbo3:turbo3:0.5 turbo4:turbo4:0.5 q8_0:turbo3:0.5 ${EXTRA_CONFIGS:-}; do
  IFS=: read -r k v eq <<<"$cfg"
  name="kld_${k}_${v}${eq:+_keq$eq}"
  runs+=("$name|eval kld -m $model --ids $ids -c 2048 -ctk $k -ctv $v --ref-ctk f32 --ref-ctv f32${eq:+ --k-eq $eq}")
done
for cfg in f16:f16: q8_0:q8_0: q8_0:turbo3t: q8_0:turbo3: turbo3:turbo3: ${EXTRA_NEEDLE:-}; do
  IFS=: read -r k v eq <<<"$cfg"
  name="needle_${k}_${v}${eq:+_keq$eq}"
  runs+=("$name|eval needle -m $model --cases $cases -ctk $k -ctv $v${eq:+ --k-eq $eq}")
done

modes=${MODES:-ppl kld needle}
selected=()
for r in "${runs[@]}"; do
  for m in $modes; do [[ $r == ${m}_* ]] && selected+=("$r"); done
done
printf '%s\n' "${selected[@]}" | xargs -P "$jobs" -I{} bash -c '
  line="{}"; name=${line%%|*}; args=${line#*|}
  start=$(date +%s)
  if '"$bin"' $args -t '"$threads"' --json > "'"$out"'/$name.json" 2> "'"$out"'/$name.log"; then
    echo "$name done in $(( $(date +%s) - start )) s"
  else
    echo "$name FAILED (see $name.log)"
  fi'
