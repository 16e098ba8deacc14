# Summarizes bench-agents JSON lines (one per agents count and repetition, tagged with "variant"): per variant the
# single agent's and 64 agents' tok/s, their ratio per repetition, and the per-window step time.
# Usage: python3 agents_summary.py W*/agents.jsonl
import json,sys,collections
for f in sys.argv[1:]:
    rows=[json.loads(l) for l in open(f) if l.startswith('{')]
    by=collections.defaultdict(list)
    for r in rows:
        by[(r['variant'])].append(r)
    print(f)
    for v,rs in by.items():
        # pair agents 1 and 64 in order of appearance per round/rep
        ones=[r for r in rs if r['agents']==1]; sixty=[r for r in rs if r['agents']==64]
        ratios=[s['decode_tok_s']/o['decode_tok_s'] for o,s in zip(ones,sixty)]
        print(f"  {v:6s} 1 agent {min(r['decode_tok_s'] for r in ones):.1f}-{max(r['decode_tok_s'] for r in ones):.1f}  64 agents {min(r['decode_tok_s'] for r in sixty):.1f}-{max(r['decode_tok_s'] for r in sixty):.1f}  ratio {min(ratios):.2f}-{max(ratios):.2f} (n={len(ratios)})  step {min(r.get('decode_only_step_s',0) for r in sixty)*1e3:.1f}-{max(r.get('decode_only_step_s',0) for r in sixty)*1e3:.1f} ms")
