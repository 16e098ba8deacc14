#!/usr/bin/env python3
"""Markdown tables of bench/gpu_spec.sh's JSON lines (docs/CUDA_SPEC.md).

Usage: bench/gpu_spec_summary.py gpu_spec.jsonl
  verify: per weight type, depth and mode (default / invariant), the k = 1 step in ms and each k's step time
          as a multiple of it (median over the run's repetitions, min..max), and invariant / default per k;
  spec:   per mode, policy and drafter: plain and speculative decode tok/s (median over the rounds of each
          process's last repetition: the first warms up), speedup, acceptance, tokens per step, lossless;
  cost:   plain prefill and decode tok/s per depth, default against --batch-invariant.
"""
import json
import statistics
import sys


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def main(path):
    rows = [json.loads(l) for l in open(path) if l.startswith("{")]
    verify = [r for r in rows if r.get("part") == "verify" and "verify" in r]
    spec = [r for r in rows if r.get("part") == "spec" and "decode_tok_s_spec_reps" in r]
    cost = [r for r in rows if r.get("part") == "cost" and "decode_tok_s" in r]

    if verify:
        ks = [v["k"] for v in verify[0]["verify"]]
        print("## Verify step cost (step time / k=1 step time, median (min..max))\n")
        print("| type | depth | mode | k=1 ms | " + " | ".join("k=%d" % k for k in ks) + " |")
        print("|---" * (len(ks) + 4) + "|")
        base = {}
        for r in sorted(verify, key=lambda r: (r["weight_type"], r["depth"], r["mode"])):
            cells = ["%.2f (%.2f..%.2f)" % (v["ratio"], v["ratio_min"], v["ratio_max"]) for v in r["verify"]]
            print("| %s | %d | %s | %.2f | %s |" % (r["weight_type"], r["depth"], r["mode"], r["verify"][0]["step_ms"],
                                                   " | ".join(cells)))
            base[(r["weight_type"], r["depth"], r["mode"])] = {v["k"]: v["step_ms"] for v in r["verify"]}
        print("\nInvariant / default step time per k:\n")
        print("| type | depth | " + " | ".join("k=%d" % k for k in ks) + " |")
        print("|---" * (len(ks) + 2) + "|")
        for (t, d, m), steps in sorted(base.items()):
            if m != "default" or (t, d, "invariant") not in base:
                continue
            inv = base[(t, d, "invariant")]
            print("| %s | %d | %s |" % (t, d, " | ".join("%.3f" % (inv[k] / steps[k]) for k in ks if k in inv)))
        print()

    if spec:
        print("## Speculative decoding, embedded model, n-max 3 (tok/s: median over rounds)\n")
        print("| mode | policy | drafter | none tok/s | spec tok/s | speedup | accept | tok/step | lossless | rounds |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        cells = {}
        for r in spec:
            cells.setdefault((r["mode"], r["spec_policy"], r["spec"]), []).append(r)
        for (mode, policy, drafter), rs in sorted(cells.items()):
            base = med([r["decode_tok_s_base_reps"][-1] for r in rs])
            sp = med([r["decode_tok_s_spec_reps"][-1] for r in rs])
            print("| %s | %s | %s | %.1f | %.1f | %.2fx | %.1f%% | %.2f | %s | %d |" % (
                mode, policy, drafter, base, sp, sp / base if base else float("nan"),
                100 * med([r["acceptance_rate"] for r in rs]), med([r["tokens_per_step"] for r in rs]),
                "yes" if all(r["lossless"] for r in rs) else "NO (%d of %d)" % (sum(not r["lossless"] for r in rs), len(rs)),
                len(rs)))
        print()

    if cost:
        print("## What --batch-invariant costs plain prefill and decode (synth llama-3.1-8b; best rep, median over rounds)\n")
        print("| type | depth | default pp tok/s | invariant pp tok/s | ratio | default tg tok/s | invariant tg tok/s | ratio |")
        print("|---|---|---|---|---|---|---|---|")
        by = {}
        for r in cost:
            by.setdefault((r["weight_type"], r["depth"], r["mode"]), []).append(r)
        for (t, d, m) in sorted(by):
            if m != "default" or (t, d, "invariant") not in by:
                continue
            a, b = by[(t, d, "default")], by[(t, d, "invariant")]
            pa, pb = med([r["prefill_tok_s"] for r in a]), med([r["prefill_tok_s"] for r in b])
            ta, tb = med([r["decode_tok_s"] for r in a]), med([r["decode_tok_s"] for r in b])
            print("| %s | %d | %.0f | %.0f | %.3f | %.1f | %.1f | %.3f |" % (t, d, pa, pb, pb / pa if pa else 0, ta, tb,
                                                                          tb / ta if ta else 0))
        print()
    failed = [r for r in rows if r.get("part") == "spec" and not r.get("lossless", True)]
    if not (verify or spec or cost):
        sys.exit("no JSON lines of bench/gpu_spec.sh in " + path)
    if failed:
        print("Not lossless: " + ", ".join("%s %s %s round %s" % (r["mode"], r["spec_policy"], r["spec"], r["round"])
                                           for r in failed))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "gpu-out/gpu_spec.jsonl")
