#!/usr/bin/env python3
"""Tables of the L2 prefetch A/B (calls Y1, Y2): per case and prefetch setting, the warm repetitions' decode tok/s
(every repetition after the first of each run, all rounds), their median, and the ratio of medians against the
same case with the prefetch off, with the range of per-round ratios.
usage: summarize_prefetch.py AB.jsonl [AB.jsonl ...]"""
import json, statistics, sys
from collections import defaultdict

def setting(o):
    return (o.get("prefetch_mb", 0), o.get("piece_kb", 16), o.get("blocks", 0), o.get("prefetch_kv_mb", 16))

for path in sys.argv[1:]:
    runs = defaultdict(lambda: defaultdict(list))  # tag -> setting -> [(round, warm reps)]
    for line in open(path):
        o = json.loads(line)
        reps = o.get("decode_tok_s_reps") or []
        runs[o["tag"]][setting(o)].append((o["round"], reps[1:] if len(reps) > 1 else reps))
    print(f"## {path}")
    print("| case | prefetch MB | piece KiB | blocks | warm reps tok/s | median | vs off | per-round ratios |")
    print("|---|---|---|---|---|---|---|---|")
    for tag, by in runs.items():
        off = [s for s in by if s[0] == 0]
        base = by[off[0]] if off else None
        base_med = statistics.median([v for _, r in base for v in r]) if base else None
        base_round = {rd: statistics.median(r) for rd, r in base} if base else {}
        for s, rr in by.items():
            vals = [v for _, r in rr for v in r]
            med = statistics.median(vals)
            ratios = [statistics.median(r) / base_round[rd] for rd, r in rr if rd in base_round]
            rng = f"{min(ratios):.3f}-{max(ratios):.3f}" if ratios else "-"
            vs = f"{med / base_med:.3f}" if base_med else "-"
            print(f"| {tag} | {s[0]} | {s[1]} | {s[2] or 'SMs'} | {min(vals):.1f}-{max(vals):.1f} | {med:.1f} | {vs} | {rng} |")
