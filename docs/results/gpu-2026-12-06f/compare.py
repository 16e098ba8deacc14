#!/usr/bin/env python3
"""Tables of calls H26-H27 (docs/MOE.md "The one-token FFN in two launches"): the A/B of the fused one-token MoE
FFN (base = main a6d7ce6's binary; noroute = POLYKV_CUDA_MOE_FUSED=noroute; new = this session's build) and polykv
against llama.cpp 3f545bec on the same file. Decode: every repetition of every round pooled; pp512: the 2nd and
later of each run (both engines' first prefill repetition includes set-up). Ratio of medians; range = far ends."""
import json, re, statistics
from collections import defaultdict
from pathlib import Path

here = Path(__file__).parent

def load(path, llama=False):
    out = defaultdict(list)
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        if not line.startswith('{'):
            continue
        d = json.loads(line)
        tag = d['tag']
        if llama:
            reps = d['samples_ts']
        else:
            reps = d['prefill_tok_s_reps'] if 'pp512' in tag else d['decode_tok_s_reps']
        if 'pp512' in tag:
            reps = reps[1:]
        out[tag] += reps
    return out

def row(name, a, b):
    ma, mb = statistics.median(a), statistics.median(b)
    print(f"| {name} | {min(a):.1f}-{max(a):.1f} | {min(b):.1f}-{max(b):.1f} | **{ma / mb:.3f}x** | "
          f"{min(a) / max(b):.2f}-{max(a) / min(b):.2f} |")

for call in ['H26', 'H27']:
    pk = load(here / call / 'polykv.jsonl')
    if not pk:
        continue
    print(f"\n{call} A/B: arm | arm's tok/s | base tok/s | ratio of medians | range")
    for tag in sorted(t for t in pk if t.startswith(('new-', 'noroute-')) and 'vs' not in t and 'llama' not in t):
        base = re.sub(r'^(new|noroute)-', 'base-', tag)
        if base in pk:
            row(tag, pk[tag], pk[base])
    ll = load(here / call / 'llama.jsonl', llama=True)
    if ll:
        print(f"\n{call}: polykv | llama.cpp | ratio of medians | range")
        for tag in sorted(ll):
            mine = [t for t in pk if t.endswith(tag) and ('vs-llama' in t or 'vsllama' in t)]
            for t in mine:
                row(t, pk[t], ll[tag])
