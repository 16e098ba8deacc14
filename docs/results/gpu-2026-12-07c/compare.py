#!/usr/bin/env python3
"""Tables of calls H35 and H36 (docs/MOE.md, "CUDA: x's activations from the norm, down in one wave, the routing
by ranks"). Decode tok/s of every repetition of every round pooled per arm; ratio of medians; range = far ends
(min a / max b .. max a / min b). Usage: compare.py [CALL_DIR ...] (default: H35 and H36 here)."""
import json, statistics, sys
from collections import defaultdict
from pathlib import Path

here = Path(__file__).parent

def load(p):
    """Every repetition per tag; a (round, tag) seen twice keeps its first run (H36's llama.cpp round 1 reran
    new-*-f16-f16 under the A/B rounds' tag: those reps are H36b's business, not the A/B's)."""
    out, seen = defaultdict(list), set()
    for name, key in (('polykv.jsonl', 'decode_tok_s_reps'), ('llama.jsonl', 'samples_ts')):
        f = p / name
        if f.exists():
            for line in f.read_text().splitlines():
                if line.startswith('{'):
                    d = json.loads(line)
                    if d.get(key) and (d['round'], d['tag']) not in seen:
                        seen.add((d['round'], d['tag']))
                        out[d['tag']] += d[key]
    return out

def row(name, a, b):
    ma, mb = statistics.median(a), statistics.median(b)
    a2, b2 = sorted(a)[1:], sorted(b)[1:]  # without each side's slowest repetition
    print(f"| {name} | {min(a):.1f}-{max(a):.1f} | {min(b):.1f}-{max(b):.1f} | **{ma / mb:.3f}x** | "
          f"{min(a) / max(b):.3f}-{max(a) / min(b):.3f} | {min(a2) / max(b2):.3f}-{max(a2) / min(b2):.3f} | "
          f"{len(a)}/{len(b)} |")

HEAD = ('| arm / baseline, file | arm tok/s | baseline tok/s | ratio of medians | range | range without the slowest '
        'rep of each | reps |\n|---|---|---|---|---|---|---|')
dirs = [Path(a) for a in sys.argv[1:]] or [here / 'H35', here / 'H36', here / 'H36b']
for p in dirs:
    d = load(p)
    if not d:
        continue
    print(f'\n{p.name}\n{HEAD}')
    if p.name.startswith('H35'):  # tags ARM-FILE (f16/f16)
        for m in ['q3moe-q4_0', 'gptoss-q4_0']:
            for arm, base in [('new', 'base'), ('pf0', 'new'), ('pf0', 'base'), ('xacts0', 'new'), ('wave0', 'new')]:
                row(f'{arm} / {base}, {m}', d[f'{arm}-{m}'], d[f'{base}-{m}'])
    elif p.name == 'H36':  # tags ARM-FILE-CTK-CTV
        for m in ['q3moe-q4_0-f16-f16', 'gptoss-q4_0-f16-f16', 'q3moe-q4_0-q8_0-turbo3t']:
            for arm, base in [('new', 'base'), ('rank0', 'new'), ('xacts0', 'new'), ('wave0', 'new'),
                              ('onewave0', 'new')]:
                if d.get(f'{arm}-{m}') and d.get(f'{base}-{m}'):
                    row(f'{arm} / {base}, {m}', d[f'{arm}-{m}'], d[f'{base}-{m}'])
    if p.name.startswith('H36b'):  # side by side with llama.cpp: sbs-FILE-KV right after llama-FILE-KV, 2 rounds
        for m in ['q3moe-q4_0', 'gptoss-q4_0']:
            for kv in ['f16', 'q8_0']:
                row(f'polykv / llama.cpp, {m}, {kv}/{kv}', d[f'sbs-{m}-{kv}'], d[f'llama-{m}-{kv}'])
