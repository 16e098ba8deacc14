#!/usr/bin/env bash
# Side by side, interleaved: polykv serve and llama.cpp's llama-server with N agents over one shared
# context, measured by the same client (bench/agents_http.py), REPS rounds of (polykv, llama).
# llama.cpp is not part of polykv: build its llama-server yourself and pass it.
# Usage: bench/agents_vs_llama.sh POLYKV LLAMA_SERVER MODEL OUT.jsonl [REPS] [AGENTS] [CONTEXT]
set -euo pipefail
polykv=$1 llama=$2 model=$3 out=$4 reps=${5:-3} agents=${6:-1,4,16} context=${7:-1536}
here=$(dirname "$0")
for r in $(seq 1 "$reps"); do
  /usr/bin/python3 "$here/agents_http.py" --server polykv --binary "$polykv" --model "$model" --agents "$agents" \
    --context "$context" --gen 32 --port 8191 --json "$out"
  /usr/bin/python3 "$here/agents_http.py" --server llama --binary "$llama" --model "$model" --agents "$agents" \
    --context "$context" --gen 32 --port 8192 --json "$out"
done
