#!/usr/bin/env python3
"""Tables of call H33 (docs/MOE.md "CUDA: the router's rows in registers, deferred norms, one-wave routing:
measured"). Decode tok/s, every repetition of every round pooled per arm; ratio of medians; range = far ends
(min a / max b .. max a / min b). off = all three changes off (main's behaviour), new = all on, wave0 / regs0 /
defer0 = one off. Usage: compare.py [CALL_DIR ...] (default: every H33* folder here)."""
import json, statistics, sys
from collections import defaultdict
from pathlib import Path

here = Path(__file__).parent

def load(paths):
    out = defaultdict(list)
    for p in paths:
        f = p / 'polykv.jsonl'
        if f.exists():
            for line in f.read_text().splitlines():
                if line.startswith('{'):
                    d = json.loads(line)
                    out[d['tag']] += d['decode_tok_s_reps']
    return out

def row(name, a, b):
    ma, mb = statistics.median(a), statistics.median(b)
    print(f"| {name} | {min(a):.1f}-{max(a):.1f} | {min(b):.1f}-{max(b):.1f} | **{ma / mb:.3f}x** | "
          f"{min(a) / max(b):.3f}-{max(a) / min(b):.3f} | {len(a)}/{len(b)} |")

dirs = [Path(a) for a in sys.argv[1:]] or sorted(p for p in here.glob('H33*') if p.is_dir())
d = load(dirs)
print('| arm / baseline, file | arm tok/s | baseline tok/s | ratio of medians | range | reps |\n|---|---|---|---|---|---|')
for m in ['q3moe-q4_0', 'q3moe-q4_0-q8t', 'gptoss-q4_0']:
    for arm, base in [('new', 'off'), ('regs0', 'new'), ('defer0', 'new'), ('wave0', 'new')]:
        a, b = d.get(f'{arm}-{m}'), d.get(f'{base}-{m}')
        if a and b:
            row(f'{arm} / {base}, {m}', a, b)
