#!/usr/bin/env python3
"""Tables of calls H55 (side by side with llama.cpp at depth 32768) and H56 (f16/f16 on the tensor-core decode
kernel against the kernels before). Decode tok/s of every repetition of every round pooled per arm; ratio of
medians; range = far ends (min a / max b .. max a / min b). Usage: compare.py [CALL_DIR ...] (default: H55, H56)."""
import json, statistics, sys
from collections import defaultdict
from pathlib import Path

here = Path(__file__).parent


def load(p):
    out = defaultdict(list)
    for name, key in (('polykv.jsonl', 'decode_tok_s_reps'), ('llama.jsonl', 'samples_ts')):
        f = p / name
        if f.exists():
            for line in f.read_text().splitlines():
                if line.startswith('{'):
                    d = json.loads(line)
                    if d.get(key):
                        out[d['tag']] += d[key]
    return out


def row(name, a, b):
    ma, mb = statistics.median(a), statistics.median(b)
    print(f"| {name} | {min(a):.1f}-{max(a):.1f} | {min(b):.1f}-{max(b):.1f} | **{ma / mb:.3f}x** | "
          f"{min(a) / max(b):.3f}-{max(a) / min(b):.3f} | {len(a)}/{len(b)} |")


HEAD = ('| arm / baseline, file | arm tok/s | baseline tok/s | ratio of medians | range | reps |\n'
        '|---|---|---|---|---|---|')
dirs = [Path(a) for a in sys.argv[1:]] or [here / 'H55', here / 'H56']
for p in dirs:
    d = load(p)
    if not d:
        continue
    print(f'\n{p.name}\n{HEAD}')
    if p.name == 'H55':  # tags NAME-K-V-d32768 (llama.cpp) and pk-NAME-K-V-d32768 (polykv), run by run
        for m in ['g3', 'l1b']:
            for kv in ['f16-f16', 'q8_0-q8_0']:
                row(f'polykv / llama.cpp, {m}, {kv}', d[f'pk-{m}-{kv}-d32768'], d[f'{m}-{kv}-d32768'])
            row(f'polykv q8_0/turbo3t / llama.cpp q8_0/q8_0, {m}', d[f'pk-{m}-q8_0-turbo3t-d32768'],
                d[f'{m}-q8_0-q8_0-d32768'])
            row(f'polykv q8_0/turbo3t / polykv q8_0/q8_0, {m}', d[f'pk-{m}-q8_0-turbo3t-d32768'],
                d[f'pk-{m}-q8_0-q8_0-d32768'])
    else:  # tags new-NAME-f16-f16-d32768 / old-...
        for m in ['g3', 'l1b', 'l8b']:
            a, b = d.get(f'new-{m}-f16-f16-d32768'), d.get(f'old-{m}-f16-f16-d32768')
            if a and b:
                row(f'new / old, {m}, f16/f16, 32768', a, b)
        a, b = d.get('at-l8b-q8_0-turbo3t-d131072'), d.get('at-l8b-f16-f16-d131072')
        if a and b:
            row('q8_0/turbo3t / f16/f16, l8b, 131072', a, b)
