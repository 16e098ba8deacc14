#!/usr/bin/env python3
"""Medians of bench/engine_step.sh's JSON lines per agent count and mode (docs/ENGINE_STEP.md)."""
import json, statistics, sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print("| agents | host ms / agent / step, old -> new (wall) | step-thread CPU ms / agent / step, old -> new | after-forward ms / agent / step, old -> new |")
print("|---|---|---|---|")
for n in sorted({r["agents"] for r in rows}):
    def med(mode, key):
        v = [r[key] for r in rows if r["agents"] == n and r["engine_step"] == mode]
        return statistics.median(v) if v else float("nan")
    cells = [f"{med('old', k):.4f} -> {med('new', k):.4f} ({med('old', k) / med('new', k):.1f}x)"
             for k in ("host_ms_per_agent_step", "host_cpu_ms_per_agent_step", "post_ms_per_agent_step")]
    print(f"| {n} | " + " | ".join(cells) + " |")
