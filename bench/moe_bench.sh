#!/usr/bin/env bash
# MoE and hybrid decode / prefill speed, polykv against llama.cpp's llama-bench, on synth files of the
# real shapes (Qwen3-30B-A3B, gpt-oss-20b, Qwen3.5-9B, Qwen3.5-35B-A3B; docs/MOE.md, docs/HYBRID.md).
# Same files, same threads, f16 KV on both, the two engines interleaved (rep 1: llama.cpp, polykv;
# rep 2: ...), REPS repetitions each. Each run warms up untimed first: llama-bench by default, polykv bench
# since 2026-12-04 (before that, polykv's prefill figures here included a cold first pass; docs/MOE.md). The decode floor is polykv's: bytes of the weights one token
# reads (attention / Gated DeltaNet, router, the k ACTIVE experts + the shared expert, output matrix)
# over the measured read bandwidth; `active_weight_bytes_per_token` in the JSON.
#
# Usage: bench/moe_bench.sh POLYKV LLAMA_BENCH [THREADS=2] [REPS=3] [OUT=docs/results/moe-2026-12-01c]
# Env: TYPE (q4_0; mxfp4 = llama.cpp's MXFP4_MOE layout as real gpt-oss files: experts mxfp4, other
#      matrices q8_0), SHAPES (default "qwen3-30b-a3b gpt-oss-20b qwen3.5-9b qwen3.5-35b-a3b"),
#      layers per shape (fewer than the real models so that the files fit a 24 GiB machine; a layer's
#      share of the time is the same; hybrids in whole periods of 4 = 3 GDN + 1 attention):
#      QWEN_LAYERS (12 of 48), OSS_LAYERS (6 of 24), Q35_LAYERS (32 of 32), Q35MOE_LAYERS (8 of 40);
#      P (128), N (32) prefill and decode tokens; WORK (/tmp/polykv_moe_bench) where the synth files
#      are written; KEEP=1 keeps them (default: each file is deleted after its shape's runs, so only
#      one is on disk at a time and the rep loop runs shape by shape, interleaving the engines).
set -euo pipefail
polykv=$1 llama=$2 threads=${3:-2} reps=${4:-3} out=${5:-docs/results/moe-2026-12-01c}
type=${TYPE:-q4_0} p=${P:-128} n=${N:-32}
work=${WORK:-/tmp/polykv_moe_bench}
mkdir -p "$work" "$out/raw"
models=()
for s in ${SHAPES:-qwen3-30b-a3b gpt-oss-20b qwen3.5-9b qwen3.5-35b-a3b}; do
  case $s in
    qwen3-30b-a3b) models+=("$s:${QWEN_LAYERS:-12}") ;;
    gpt-oss-20b) models+=("$s:${OSS_LAYERS:-6}") ;;
    qwen3.5-9b) models+=("$s:${Q35_LAYERS:-32}") ;;
    qwen3.5-35b-a3b) models+=("$s:${Q35MOE_LAYERS:-8}") ;;
    *) echo "unknown shape $s" >&2; exit 2 ;;
  esac
done
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for m in "${models[@]}"; do
  shape=${m%%:*} layers=${m##*:}
  f="$work/$shape-$type-L$layers.gguf"
  [ -f "$f" ] || "$polykv" synth --shape "$shape" --type "$type" --layers "$layers" --threads "$threads" -o "$f"
  for r in $(seq 1 "$reps"); do
    tag="$shape-L$layers-r$r"
    echo "== rep $r $shape ($layers layers, $type, $threads threads) load $(cut -d' ' -f1 /proc/loadavg)" >&2
    # llama.cpp failing on a file (an architecture it does not know) is recorded, not fatal.
    "$llama" -m "$f" -p "$p" -n "$n" -t "$threads" -r 1 -ctk f16 -ctv f16 -o json > "$out/raw/llama-$tag.json" \
      2>"$out/raw/llama-$tag.err" || echo "llama-bench failed on $shape (see $out/raw/llama-$tag.err)" >&2
    "$polykv" bench -m "$f" -p "$p" -n "$n" -t "$threads" -r 1 -ctk f16 -ctv f16 --json > "$out/raw/polykv-$tag.json" \
      2>"$out/raw/polykv-$tag.err"
  done
  [ "${KEEP:-0}" = 1 ] || rm -f "$f"
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
/usr/bin/python3 - "$out" "$reps" "$threads" "$type" "$p" "$n" "$load_before" "$load_after" "${models[@]}" <<'PY'
import json, statistics, sys
out, reps, threads, wtype, p, n, lb, la = sys.argv[1:9]
models = sys.argv[9:]
res = {"machine_load_before": lb, "machine_load_after": la, "nproc": __import__("os").cpu_count(),
       "threads": int(threads), "weight_type": wtype, "n_prompt": int(p), "n_gen": int(n), "reps": int(reps),
       "kv": "f16/f16", "interleaved": True, "models": {}}
def s(v): return {"median": statistics.median(v), "min": min(v), "max": max(v), "reps": v} if v else None
for m in models:
    shape, layers = m.split(":")
    pk = {"pp": [], "tg": []}; ll = {"pp": [], "tg": []}; floor = []; wbytes = None; bw = []
    for r in range(1, int(reps) + 1):
        tag = f"{shape}-L{layers}-r{r}"
        j = json.load(open(f"{out}/raw/polykv-{tag}.json"))
        pk["pp"].append(j["prefill_tok_s"]); pk["tg"].append(j["decode_tok_s"])
        floor.append(j["decode_floor_tok_s"]); wbytes = j["weight_bytes_per_token"]; bw.append(j["mem_read_bw_gbs"])
        try:
            for t in json.load(open(f"{out}/raw/llama-{tag}.json")):
                ll["pp" if t["n_prompt"] > 0 else "tg"].append(t["avg_ts"])
        except (ValueError, OSError):
            pass  # llama-bench failed: its .err says why
    e = {"layers": int(layers), "polykv": {k: s(v) for k, v in pk.items()}, "llama_cpp": {k: s(v) for k, v in ll.items()},
         "active_weight_bytes_per_token": wbytes, "mem_read_bw_gbs": s(bw), "decode_floor_tok_s": s(floor)}
    e["polykv_decode_fraction_of_floor"] = statistics.median(pk["tg"]) / statistics.median(floor)
    line = f"{shape} L{layers}: decode polykv {e['polykv']['tg']['median']:.2f} tok/s, prefill {e['polykv']['pp']['median']:.1f}"
    if ll["tg"] and ll["pp"]:
        for k in ("pp", "tg"):
            e[f"ratio_{k}_median"] = statistics.median(pk[k]) / statistics.median(ll[k])
            e[f"ratio_{k}_range"] = [min(pk[k]) / max(ll[k]), max(pk[k]) / min(ll[k])]
        line += (f"; llama.cpp {e['llama_cpp']['tg']['median']:.2f} / {e['llama_cpp']['pp']['median']:.1f}: "
                 f"decode {e['ratio_tg_median']:.2f}x ({e['ratio_tg_range'][0]:.2f}-{e['ratio_tg_range'][1]:.2f}), "
                 f"prefill {e['ratio_pp_median']:.2f}x ({e['ratio_pp_range'][0]:.2f}-{e['ratio_pp_range'][1]:.2f})")
    else:
        line += "; llama.cpp: no result"
    line += f"; floor {e['decode_floor_tok_s']['median']:.2f} tok/s ({wbytes / 1e6:.0f} MB/token)"
    res["models"][shape] = e
    print(line)
json.dump(res, open(f"{out}/moe_bench.json", "w"), indent=1)
PY
