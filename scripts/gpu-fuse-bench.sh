#!/usr/bin/env bash
# Decode tok/s of the fused decode ops (issue #9, docs/CUDA_DECODE.md "Fused output projections")
# against their switches, on the GPU machine from the repo root with build-gpu/ carried
# (scripts/gpu-build.sh): `polykv bench --device cuda -p 0 -n 128 -d 0 -r 3` on synth llama-3.1-8b
# q4_0 (made if missing) for every variant, INTERLEAVED (round 1: all variants, round 2: all ...),
# ROUNDS rounds (default 3), KV f16/f16 and q8_0/turbo3t.
#   VARIANTS: space-separated NAME=ENV,ENV (default below: the new path and each switch back to the old).
# Output under $OUT: fuse-decode.jsonl (bench's JSON + "variant", "round", "kv"), fuse-bench.log,
# summary.txt (tok/s per run and the median per variant and KV).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BUDGET=${POLYKV_GPU_BUDGET_S:-560}
MODEL=${POLYKV_GPU_MODEL:-/tmp/llama-3.1-8b-q4_0.gguf}
BIN=${POLYKV_GPU_BIN:-build-gpu}
ROUNDS=${ROUNDS:-3}
SUMMARY=$OUT/summary.txt
T0=$SECONDS
STAGE_MIN_S=15 STAGE_WIDTH=40
# shellcheck source=scripts/gpu-lib.sh
source scripts/gpu-lib.sh
setup_gpu_libraries
note "gpu-fuse-bench: commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'); $(nvidia-smi --query-gpu=name --format=csv,noheader 2>&1)"
if [[ ! -s $MODEL ]]; then
  stage "synth llama-3.1-8b q4_0" 120 "$OUT/fuse-bench.log" \
    $BIN/polykv synth --shape llama-3.1-8b --type q4_0 -o "$MODEL" --threads 8 || rm -f "$MODEL"
fi
VARIANTS=${VARIANTS:-"default= nofuserope=POLYKV_CUDA_FUSE_ROPE=0 plain=POLYKV_CUDA_FUSED=0"}
part=$(mktemp)
for r in $(seq 1 "$ROUNDS"); do
  for kv in f16/f16 q8_0/turbo3t; do
    for v in $VARIANTS; do
      name=${v%%=*} envs=${v#*=} e=()
      [[ -n $envs ]] && IFS=, read -r -a e <<<"$envs"
      # shellcheck disable=SC2016
      if stage "$name $kv r$r" 60 "$OUT/fuse-bench.log" env "${e[@]}" bash -c '"$@" >"$0"' "$part" \
        $BIN/polykv bench -m "$MODEL" --device cuda -p 0 -n 128 -d 0 -r 3 -ctk "${kv%/*}" -ctv "${kv#*/}" --json \
        --bandwidth 4240; then
        grep '^{' "$part" | sed "s|^{|{\"variant\":\"$name\",\"round\":$r,\"kv\":\"$kv\",|" >>"$OUT/fuse-decode.jsonl"
        note "     $(grep -oE '"decode_tok_s_reps":\[[^]]*\]' "$part")"
      fi
    done
  done
done
rm -f "$part"
# Median over rounds of each run's best repetition (the first repetition warms up), per variant and KV.
if [[ -s $OUT/fuse-decode.jsonl ]]; then
  python3 - "$OUT/fuse-decode.jsonl" <<'PY' | tee -a "$SUMMARY"
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    try:
        j = json.loads(line)
    except ValueError:
        continue
    reps = j.get("decode_tok_s_reps") or [j.get("decode_tok_s", 0)]
    runs.setdefault((j["kv"], j["variant"]), []).append(max(reps[1:] or reps))
for (kv, v), xs in sorted(runs.items()):
    print(f"{kv:14s} {v:12s} median {statistics.median(xs):8.1f} tok/s  runs {' '.join(f'{x:.1f}' for x in xs)}")
PY
fi
note "done in $((SECONDS - T0)) s"
