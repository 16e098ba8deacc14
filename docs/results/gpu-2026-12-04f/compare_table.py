#!/usr/bin/env python3
"""Side-by-side table of calls X1-X3 (and of 2026-12-06b's H13) (polykv bench --json and llama-bench -o jsonl lines, tagged by the call scripts).

Usage: compare_table.py DIR...   (each DIR holds polykv.jsonl and llama.jsonl)
Per tag: polykv's repetitions (all, and the warm ones: every repetition after the first of each bench run, whose
first prefill repetition includes the cuBLAS and graph set-up) and llama-bench's samples (llama-bench runs its own
warm-up first), as min-max and median, and the ratio of the medians with the ratio of the ranges' far ends.
"""
import json, re, statistics, sys
from collections import defaultdict

pk_all, pk_warm, ll = defaultdict(list), defaultdict(list), defaultdict(list)
for d in sys.argv[1:]:
    for line in open(f"{d}/polykv.jsonl"):
        j = json.loads(line)
        # A prefill tag's reps are the prefill's (2026-12-06b's H13 ran its pp benches with -n 1: decode reps too).
        is_pp = re.search(r"(^|-)pp[0-9]", j["tag"]) is not None
        reps = (j.get("prefill_tok_s_reps") if is_pp else j.get("decode_tok_s_reps")) or []
        pk_all[j["tag"]] += reps
        pk_warm[j["tag"]] += reps[1:]
    for line in open(f"{d}/llama.jsonl"):
        j = json.loads(line)
        ll[j["tag"]] += j["samples_ts"]

def rng(v):
    return f"{min(v):.1f}-{max(v):.1f} (med {statistics.median(v):.1f})" if v else "-"

print("| tag | polykv, all reps | polykv, warm reps | llama.cpp | ratio of medians (warm) | far ends |")
print("|---|---|---|---|---|---|")
tags = list(dict.fromkeys(list(pk_all) + list(ll)))
for t in tags:
    lt = ll.get(t) or ll.get(t.replace("-t3t", "-q8"))  # polykv's q8_0/turbo3t against llama.cpp's q8_0/q8_0
    p, w = pk_all.get(t, []), pk_warm.get(t, [])
    ratio = ends = "-"
    if w and lt:
        ratio = f"{statistics.median(w) / statistics.median(lt):.2f}x"
        ends = f"{min(w) / max(lt):.2f}-{max(w) / min(lt):.2f}"
    print(f"| {t} | {rng(p)} | {rng(w)} | {rng(lt or [])} | {ratio} | {ends} |")
