"""Summary of run.sh's JSON: per pair, every repetition of each side, median and min-max, and the ratio of medians
with the range of per-round ratios (round r's best rep of B over round r's best rep of A)."""
import glob, json, statistics

PAIRS = [("q35-35b-decode", "old", "tokenstep", "decode_tok_s_reps"),
         ("q35-35b-decode", "old", "tokenstep", "prefill_tok_s_reps"),
         ("q35-35b-pp512", "tokenstep-only", "chunked", "prefill_tok_s_reps"),
         ("q35-9b", "old", "chk", "prefill_tok_s_reps"),
         ("q35-9b", "old", "chk", "decode_tok_s_reps")]
out = {}
for stem, a, b, key in PAIRS:
    side = {}
    for v in (a, b):
        runs = [json.load(open(f)) for f in sorted(glob.glob(f"{stem}-{v}-r*.json"))]
        side[v] = {"runs": [r[key] for r in runs], "best_per_round": [max(r[key]) for r in runs],
                   "bw_gbs": [round(r["mem_read_bw_gbs"], 1) for r in runs]}
    ma = statistics.median(side[a]["best_per_round"])
    mb = statistics.median(side[b]["best_per_round"])
    ratios = [y / x for x, y in zip(side[a]["best_per_round"], side[b]["best_per_round"])]
    out[f"{stem} {key}"] = {a: side[a], b: side[b], "median_a": ma, "median_b": mb, "ratio_of_medians": mb / ma,
                            "per_round_ratio_min": min(ratios), "per_round_ratio_max": max(ratios)}
print(json.dumps(out, indent=1))
