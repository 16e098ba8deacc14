#!/usr/bin/python3
"""Ratio table of bench/isa_compare.sh: per (ISA, weights, test), tok/s of each engine and KV pair
(median, min–max over repetitions) and polykv / llama.cpp per repetition (median, min–max).
Usage: bench/isa_compare_summary.py RUNS.jsonl   (prints Markdown; writes RUNS.summary.json beside it)"""
import collections, json, statistics, sys

runs = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
cells = collections.defaultdict(dict)  # (isa, weights, test) -> {(engine, kv): {rep: tok_s}}
loads = collections.defaultdict(list)
for r in runs:
    key = (r["isa"], r["weights"], r["test"])
    cells[key].setdefault((r["engine"], r["kv"]), {})[r["rep"]] = r["tok_s"]
    loads[key].append(r["load1"])

def stats(vals):
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals)} if vals else None

def fmt(s, f="%.2f"):
    return "n/a" if not s else (f % s["median"]) + " (" + (f % s["min"]) + "–" + (f % s["max"]) + ")"

out, order = [], {"tg": 0, "pp512": 1, "depth": 2}
print("| ISA | weights | test | polykv KV | polykv tok/s | llama.cpp KV | llama.cpp tok/s | polykv / llama.cpp | reps | load1 |")
print("|---|---|---|---|---|---|---|---|---|---|")
for key in sorted(cells, key=lambda k: (k[0], order.get(k[2], 9), k[1])):
    c = cells[key]
    for (pe, pkv), p in sorted(c.items()):
        if pe != "polykv": continue
        for (le, lkv), l in sorted(c.items()):
            if le != "llama.cpp": continue
            reps = sorted(set(p) & set(l))
            ratio = stats([p[i] / l[i] for i in reps])
            row = {"isa": key[0], "weights": key[1], "test": key[2], "polykv_kv": pkv, "llama_kv": lkv,
                   "polykv_tok_s": stats(list(p.values())), "llama_tok_s": stats(list(l.values())),
                   "ratio": ratio, "load1": stats(loads[key])}
            out.append(row)
            print("| %s | %s | %s | %s | %s | %s | %s | %s | %d | %s |" % (key[0], key[1], key[2], pkv, fmt(row["polykv_tok_s"], "%.1f"),
                  lkv, fmt(row["llama_tok_s"], "%.1f"), fmt(ratio), len(reps), fmt(row["load1"], "%.1f")))
json.dump(out, open(sys.argv[1].rsplit(".", 1)[0] + ".summary.json", "w"), indent=1)
