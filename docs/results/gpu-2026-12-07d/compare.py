#!/usr/bin/env python3
"""Tables of the A/B calls of docs/results/gpu-2026-12-07d and later. polykv.jsonl tags are ARM-REST (REST: the file
and KV types); every repetition of every round pooled per tag; ratio of medians; range = far ends (min a / max b ..
max a / min b); also without each side's slowest repetition (the first repetition of a run includes warm-up).
Usage: compare.py CALL_DIR [CALL_DIR ...]"""
import json, statistics, sys
from collections import defaultdict
from pathlib import Path

PAIRS = [('new', 'base'), ('new', 'rank0'), ('new', 'nofuse'), ('nofuse', 'base'), ('new', 'old'), ('new', 'self0'),
         ('new', 'notc'), ('new', 'nowin')]

def load(p):
    out = defaultdict(list)
    for line in (p / 'polykv.jsonl').read_text().splitlines():
        if line.startswith('{'):
            d = json.loads(line)
            if d.get('decode_tok_s_reps'):
                out[d['tag']] += d['decode_tok_s_reps']
    return out

def row(name, a, b):
    ma, mb = statistics.median(a), statistics.median(b)
    a2, b2 = sorted(a)[1:], sorted(b)[1:]
    print(f"| {name} | {min(a):.1f}-{max(a):.1f} | {min(b):.1f}-{max(b):.1f} | **{ma / mb:.3f}x** | "
          f"{min(a) / max(b):.3f}-{max(a) / min(b):.3f} | {min(a2) / max(b2):.3f}-{max(a2) / min(b2):.3f} | "
          f"{len(a)}/{len(b)} |")

for arg in sys.argv[1:]:
    p = Path(arg)
    d = load(p)
    rests = sorted({t.split('-', 1)[1] for t in d if '-' in t})
    print(f'\n{p.name}\n| arm / baseline, file and KV | arm tok/s | baseline tok/s | ratio of medians | range | '
          'range without the slowest rep of each | reps |\n|---|---|---|---|---|---|---|')
    for rest in rests:
        for a, b in PAIRS:
            if f'{a}-{rest}' in d and f'{b}-{rest}' in d:
                row(f'{a} / {b}, {rest}', d[f'{a}-{rest}'], d[f'{b}-{rest}'])
    others = sorted(t for t in d if t.split('-', 1)[0] not in {x for pr in PAIRS for x in pr})
    for t in others:
        v = d[t]
        print(f'| {t} | {min(v):.1f}-{max(v):.1f} (median {statistics.median(v):.1f}) | | | | | {len(v)} |')
