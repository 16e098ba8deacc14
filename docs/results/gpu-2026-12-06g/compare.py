#!/usr/bin/env python3
"""Tables of calls H29-H30c (docs/MOE.md "CUDA: registers routing, early loads; two negatives"). Decode tok/s, every
repetition of every round pooled per arm; ratio of medians; range = far ends (min a / max b .. max a / min b).
H29/H29b ran on an H200, H30/H30b/H30c on an H100: ratios only within one call's machine."""
import json, re, statistics
from collections import defaultdict
from pathlib import Path

here = Path(__file__).parent

def load_jsonl(path):
    out = defaultdict(list)
    if path.exists():
        for line in path.read_text().splitlines():
            if line.startswith('{'):
                d = json.loads(line)
                out[d['tag']] += d['samples_ts'] if 'samples_ts' in d else d['decode_tok_s_reps']
    return out

def load_txt(path):  # "fused=MODE rR: "decode_tok_s_reps":[...]" lines (H30c)
    out = defaultdict(list)
    if path.exists():
        for line in path.read_text().splitlines():
            m = re.match(r'fused=(\S+) r\d: "decode_tok_s_reps":\[([^\]]*)\]', line)
            if m:
                out['fused' + m.group(1)] += [float(v) for v in m.group(2).split(',')]
    return out

def row(name, a, b):
    ma, mb = statistics.median(a), statistics.median(b)
    print(f"| {name} | {min(a):.1f}-{max(a):.1f} | {min(b):.1f}-{max(b):.1f} | **{ma / mb:.3f}x** | "
          f"{min(a) / max(b):.3f}-{max(a) / min(b):.3f} |")

def table(title, d, pairs):
    print(f"\n{title}\n| arm vs baseline | arm tok/s | baseline tok/s | ratio of medians | range |\n|---|---|---|---|---|")
    for name, a, b in pairs:
        if d.get(a) and d.get(b):
            row(name, d[a], d[b])

h29 = load_jsonl(here / 'H29' / 'polykv.jsonl')
for k, v in load_jsonl(here / 'H29b' / 'polykv.jsonl').items():
    h29[k.replace('q3moe-tg', 'q3moe-q4_0-tg').replace('gptoss-tg', 'gptoss-q4_0-tg')] += v
table('H29 + H29b (H200; base = a6d7ce6, the five kernels; new = + early down; noearly = main + H27 + x_smem; '
      'plain = main + H27)', h29, [
    (f'{arm} / base, {m} {kv}', f'{arm}-{m}-tg-{kv}', f'base-{m}-tg-{kv}')
    for m, kv in [('q3moe-q4_0', 'f16-f16'), ('q3moe-q4_0', 'q8_0-turbo3t'), ('gptoss-q4_0', 'f16-f16')]
    for arm in ['new', 'noearly', 'nosmem', 'plain']] + [
    ('new / noearly (early down), q3moe f16', 'new-q3moe-q4_0-tg-f16-f16', 'noearly-q3moe-q4_0-tg-f16-f16'),
    ('noearly / plain (x_smem), q3moe f16', 'noearly-q3moe-q4_0-tg-f16-f16', 'plain-q3moe-q4_0-tg-f16-f16')])
llama = load_jsonl(here / 'H29' / 'llama.jsonl')
both = dict(h29)
both.update({'llama-' + k: v for k, v in llama.items()})
table('H29 (H200): polykv (new arm) vs llama.cpp 3f545bec', both, [
    ('q3moe f16/f16', 'vsllama-q3moe-q4_0-tg-f16', 'llama-q3moe-q4_0-tg-f16'),
    ('gptoss f16/f16', 'vsllama-gptoss-q4_0-tg-f16', 'llama-gptoss-q4_0-tg-f16')])
h30 = load_jsonl(here / 'H30' / 'polykv.jsonl')
table('H30 (H100): h27 = main 4403a17 + the H27 patch, vs main', h30, [
    (f'h27 / main, {m} {kv}', f'h27-{m}-tg-{kv}', f'main-{m}-tg-{kv}')
    for m, kv in [('q3moe-q4_0', 'f16-f16'), ('q3moe-q4_0', 'q8_0-turbo3t'), ('gptoss-q4_0', 'f16-f16')]])
h30b = load_jsonl(here / 'H30b' / 'polykv.jsonl')
for k, v in load_txt(here / 'H30c' / 'h30c.txt').items():
    h30b[k + '-c'] += v
table('H30b + H30c (H100): gpt-oss-20b q4_0 f16/f16, main + H27; POLYKV_CUDA_MOE_FUSED=1 / 0 / noroute', h30b, [
    ('fused / five kernels (H30b)', 'fused1', 'fused0'),
    ('fused / five kernels (H30c)', 'fused1-c', 'fused0-c'),
    ('noroute / five kernels (H30c)', 'fusednoroute-c', 'fused0-c'),
    ('fused / noroute (H30c)', 'fused1-c', 'fusednoroute-c')])
