#!/usr/bin/env python3
"""Summarizes an A/B file of `polykv bench --json` lines tagged with attn_acts and round (calls G1, G2):
per (depth, K/V), each setting's warm repetitions (2nd and later: the 1st includes set-up) as min-max over
all rounds, the medians, and the ratio of medians default (attn_acts 1) / off (attn_acts 0), with the ratio of
each round's medians beside it. Usage: summarize_ab.py AB.jsonl"""
import json
import statistics
import sys
from collections import defaultdict

warm = defaultdict(list)    # (depth, kv, s) -> all warm reps
per_round = defaultdict(list)  # (depth, kv, s, round) -> warm reps
for line in open(sys.argv[1]):
    j = json.loads(line)
    key = (j["depth"], j["cache_type_k"] + "/" + j["cache_type_v"])
    reps = j["decode_tok_s_reps"][1:]
    warm[key + (j["attn_acts"],)] += reps
    per_round[key + (j["attn_acts"], j["round"])] += reps
print("| depth | K/V | attn_acts=0 tok/s | default (attn_acts=1) | ratio of medians | per-round ratios |")
print("|---|---|---|---|---|---|")
for key in sorted({k[:2] for k in warm}):
    a, b = warm[key + (0,)], warm[key + (1,)]
    if not a or not b:
        continue
    rounds = sorted({k[3] for k in per_round if k[:2] == key})
    rr = [statistics.median(per_round[key + (1, r)]) / statistics.median(per_round[key + (0, r)])
          for r in rounds if per_round.get(key + (0, r)) and per_round.get(key + (1, r))]
    print(f"| {key[0]} | {key[1]} | {min(a):.1f}-{max(a):.1f} | {min(b):.1f}-{max(b):.1f} | "
          f"{statistics.median(b) / statistics.median(a):.3f}x | {', '.join(f'{x:.3f}' for x in rr)} |")
