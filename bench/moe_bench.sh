#!/usr/bin/env bash
# MoE decode and prefill speed, polykv against llama.cpp's llama-bench, on synth files of the real
# shapes (Qwen3-30B-A3B, gpt-oss-20b; docs/MOE.md). Same files, same threads, the two engines
# interleaved (rep 1: llama.cpp, polykv; rep 2: ...), REPS repetitions each. The decode floor is
# polykv's: bytes of the weights one token reads (attention, router, the k ACTIVE experts, output
# matrix) over the measured read bandwidth.
#
# Usage: bench/moe_bench.sh POLYKV LLAMA_BENCH [THREADS=2] [REPS=3] [OUT=docs/results/moe-2026-12-01]
# Env: TYPE (q4_0; mxfp4 = llama.cpp's MXFP4_MOE layout as real gpt-oss files: experts mxfp4, other
#      matrices q8_0), SHAPES ("qwen3-30b-a3b gpt-oss-20b": which of the two to run), QWEN_LAYERS (12 of 48), OSS_LAYERS (6 of 24): fewer layers than the real models so
#      the files fit a 24 GiB machine (a layer's share of the time is the same); P (128), N (32) prefill
#      and decode tokens; WORK (/tmp/polykv_moe_bench) where the synth files are kept between runs.
set -euo pipefail
polykv=$1 llama=$2 threads=${3:-2} reps=${4:-3} out=${5:-docs/results/moe-2026-12-01}
type=${TYPE:-q4_0} ql=${QWEN_LAYERS:-12} ol=${OSS_LAYERS:-6} p=${P:-128} n=${N:-32}
work=${WORK:-/tmp/polykv_moe_bench}
mkdir -p "$work" "$out/raw"
models=()
for s in ${SHAPES:-qwen3-30b-a3b gpt-oss-20b}; do
  case $s in
    qwen3-30b-a3b) models+=("$s:$ql") ;;
    gpt-oss-20b) models+=("$s:$ol") ;;
    *) echo "unknown shape $s" >&2; exit 2 ;;
  esac
done
for m in "${models[@]}"; do
  shape=${m%%:*} layers=${m##*:}
  f="$work/$shape-$type-L$layers.gguf"
  [ -f "$f" ] || "$polykv" synth --shape "$shape" --type "$type" --layers "$layers" --threads "$threads" -o "$f"
done
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for r in $(seq 1 "$reps"); do
  for m in "${models[@]}"; do
    shape=${m%%:*} layers=${m##*:}
    f="$work/$shape-$type-L$layers.gguf"
    tag="$shape-L$layers-r$r"
    echo "== rep $r $shape ($layers layers, $type, $threads threads)" >&2
    "$llama" -m "$f" -p "$p" -n "$n" -t "$threads" -r 1 -ctk f16 -ctv f16 -o json > "$out/raw/llama-$tag.json" 2>"$out/raw/llama-$tag.err"
    "$polykv" bench -m "$f" -p "$p" -n "$n" -t "$threads" -r 1 -ctk f16 -ctv f16 --json > "$out/raw/polykv-$tag.json" 2>/dev/null
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
/usr/bin/python3 - "$out" "$reps" "$threads" "$type" "$p" "$n" "$load_before" "$load_after" "${models[@]}" <<'PY'
import json, statistics, sys, subprocess
out, reps, threads, wtype, p, n, lb, la = sys.argv[1:9]
models = sys.argv[9:]
res = {"machine_load_before": lb, "machine_load_after": la, "threads": int(threads), "weight_type": wtype,
       "n_prompt": int(p), "n_gen": int(n), "reps": int(reps), "kv": "f16/f16", "interleaved": True, "models": {}}
for m in models:
    shape, layers = m.split(":")
    pk = {"pp": [], "tg": []}; ll = {"pp": [], "tg": []}; floor = []; wbytes = None
    for r in range(1, int(reps) + 1):
        tag = f"{shape}-L{layers}-r{r}"
        j = json.load(open(f"{out}/raw/polykv-{tag}.json"))
        pk["pp"].append(j["prefill_tok_s"]); pk["tg"].append(j["decode_tok_s"])
        floor.append(j["decode_floor_tok_s"]); wbytes = j["weight_bytes_per_token"]
        for t in json.load(open(f"{out}/raw/llama-{tag}.json")):
            ll["pp" if t["n_prompt"] > 0 else "tg"].append(t["avg_ts"])
    def s(v): return {"median": statistics.median(v), "min": min(v), "max": max(v), "reps": v}
    e = {"layers": int(layers), "polykv": {k: s(v) for k, v in pk.items()}, "llama_cpp": {k: s(v) for k, v in ll.items()},
         "active_weight_bytes_per_token": wbytes, "decode_floor_tok_s": s(floor)}
    for k in ("pp", "tg"):
        e[f"ratio_{k}_median"] = statistics.median(pk[k]) / statistics.median(ll[k])
        e[f"ratio_{k}_range"] = [min(pk[k]) / max(ll[k]), max(pk[k]) / min(ll[k])]
    res["models"][shape] = e
    print(f"{shape} L{layers}: decode polykv {e['polykv']['tg']['median']:.2f} vs llama.cpp {e['llama_cpp']['tg']['median']:.2f} "
          f"tok/s = {e['ratio_tg_median']:.2f}x; prefill {e['polykv']['pp']['median']:.1f} vs {e['llama_cpp']['pp']['median']:.1f} "
          f"= {e['ratio_pp_median']:.2f}x; floor {e['decode_floor_tok_s']['median']:.2f} tok/s")
json.dump(res, open(f"{out}/moe_bench.json", "w"), indent=1)
PY
