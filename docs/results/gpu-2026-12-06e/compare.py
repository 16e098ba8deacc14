#!/usr/bin/env python3
"""Tables of calls H23-H24 (docs/PERFORMANCE.md "Thirty-second session"): polykv against llama.cpp by tag (every
round's repetitions pooled), and the A/B of POLYKV_CUDA_FUSE_QKNORM (H23-H23c) and POLYKV_CUDA_FUSE_POSTNORM (H24).
Decode: all repetitions; pp512: the 2nd and later of each run (both engines' first prefill repetition includes
set-up). Ratio of medians; range = far ends."""
import json, statistics, sys
from collections import defaultdict
from pathlib import Path

here = Path(__file__).parent

def load(path, key):
    out = defaultdict(list)
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        if not line.startswith('{'):
            continue
        d = json.loads(line)
        tag = d['tag']
        if key == 'llama':
            reps = d['samples_ts']
        else:
            reps = d['prefill_tok_s_reps'] if 'pp512' in tag else d['decode_tok_s_reps']
        if 'pp512' in tag:
            reps = reps[1:]
        out[tag] += reps
    return out

def row(name, a, b):
    ma, mb = statistics.median(a), statistics.median(b)
    print(f"| {name} | {min(a):.1f}-{max(a):.1f} | {min(b):.1f}-{max(b):.1f} | **{ma / mb:.2f}x** | "
          f"{min(a) / max(b):.2f}-{max(a) / min(b):.2f} |")

for call in ['H23', 'H23c', 'H23d']:
    pk, ll = load(here / call / 'polykv.jsonl', 'polykv'), load(here / call / 'llama.jsonl', 'llama')
    print(f"\n{call}: polykv | llama.cpp | ratio of medians | range")
    for tag in sorted(pk):
        other = tag.replace('-t3t', '-q8')
        if other in ll:
            row(tag + (' (vs llama q8_0/q8_0)' if tag != other else ''), pk[tag], ll[other])
        else:
            print(f"| {tag} | {min(pk[tag]):.1f}-{max(pk[tag]):.1f} | - |")
    for tag in sorted(set(ll) - set(pk)):
        print(f"| {tag} (llama only) | - | {min(ll[tag]):.1f}-{max(ll[tag]):.1f} |")
for call in ['H23', 'H23b', 'H23c', 'H24']:
    ab = defaultdict(list)
    for line in (here / call / ('polykv.jsonl' if call == 'H23' else 'ab.jsonl')).read_text().splitlines():
        d = json.loads(line)
        if 'qknorm' in d['tag'] or 'postnorm' in d['tag']:
            ab[d['tag']] += d['decode_tok_s_reps']
    switch = 'FUSE_POSTNORM' if call == 'H24' else 'FUSE_QKNORM'
    print(f"\n{call} A/B: fused (default) | plain ({switch}=0) | ratio | range")
    for tag in sorted(t for t in ab if '-1-' in t):
        row(tag, ab[tag], ab[tag.replace('-1-', '-0-')])
