#!/usr/bin/env python3
"""Tables of calls H35 and H36 (docs/MOE.md, "CUDA: x's activations from the norm, down in one wave, the routing
by ranks"). Decode tok/s of every repetition of every round pooled per arm; ratio of medians; range = far ends
(min a / max b .. max a / min b). Usage: compare.py [CALL_DIR ...] (default: H35 and H36 here)."""
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

HEAD = '| arm / baseline, file | arm tok/s | baseline tok/s | ratio of medians | range | reps |\n|---|---|---|---|---|---|'
dirs = [Path(a) for a in sys.argv[1:]] or [here / 'H35', here / 'H36']
for p in dirs:
    d = load(p)
    if not d:
        continue
    print(f'\n{p.name}\n{HEAD}')
    if p.name.startswith('H35'):  # tags ARM-FILE (f16/f16)
        for m in ['q3moe-q4_0', 'gptoss-q4_0']:
            for arm, base in [('new', 'base'), ('pf0', 'new'), ('pf0', 'base'), ('xacts0', 'new'), ('wave0', 'new')]:
                row(f'{arm} / {base}, {m}', d[f'{arm}-{m}'], d[f'{base}-{m}'])
    else:  # tags ARM-FILE-CTK-CTV; llama-FILE-f16 / -q8
        for m in ['q3moe-q4_0-f16-f16', 'gptoss-q4_0-f16-f16', 'q3moe-q4_0-q8_0-turbo3t']:
            for arm, base in [('new', 'base'), ('rank0', 'new'), ('xacts0', 'new'), ('wave0', 'new'),
                              ('onewave0', 'new')]:
                if d.get(f'{arm}-{m}') and d.get(f'{base}-{m}'):
                    row(f'{arm} / {base}, {m}', d[f'{arm}-{m}'], d[f'{base}-{m}'])
        for m in ['q3moe-q4_0', 'gptoss-q4_0']:
            for kv, lk in [('f16-f16', 'f16'), ('q8_0-q8_0', 'q8')]:
                # the new arm of the llama.cpp rounds only (tags new-FILE-q8_0-q8_0; for f16 the A/B rounds share it)
                a, b = d.get(f'new-{m}-{kv}'), d.get(f'llama-{m}-{lk}')
                if a and b:
                    row(f'polykv / llama.cpp, {m}, {kv}', a, b)
