#!/usr/bin/env python3
"""Offline study of n-gram (prompt-lookup) drafters on recorded greedy continuations.

With greedy decoding the speculative output equals the plain output, so tokens per verify step of a
deterministic drafter at a fixed n-max follow from the context and the plain continuation alone:
each step drafts from the history, the accepted drafts are the longest prefix equal to the
continuation, and the step emits them plus one token. No timing, no noise.

Input: JSON lines of `polykv bench --spec ngram ... --json` cells (they carry `output_ids`, the plain
greedy continuation) and the token ids of the text (`polykv tokenize -m MODEL < TEXT`), so that the
context of a cell is ids[:depth + n_prompt].

Usage: spec_ngram_sim.py IDS_FILE CELLS.jsonl [NMAX...]
"""
import json
import sys


def lookup_latest(hist, nmin, nmax, k):
    """polykv's NgramDrafter: for n = nmax..nmin, the latest earlier occurrence of the last n tokens."""
    L = len(hist)
    for n in range(min(nmax, L - 1), nmin - 1, -1):
        q = hist[L - n:]
        for j in range(L - 1, n - 1, -1):  # follower position j, n-gram hist[j-n:j]
            if hist[j - n:j] == q:
                return hist[j:j + k]
    return []


def lookup_longest(hist, nmin, nmax, k, max_back=64):
    """Among the occurrences of the last nmin tokens, the one whose match extends furthest back
    (up to max_back tokens), latest first on ties (nmax unused)."""
    L = len(hist)
    best, best_len = [], 0
    q = hist[L - nmin:]
    for j in range(L - 1, nmin - 1, -1):
        if hist[j - nmin:j] != q:
            continue
        m = nmin
        while m < max_back and j - m - 1 >= 0 and hist[j - m - 1] == hist[L - m - 1]:
            m += 1
        if m > best_len:
            best, best_len = hist[j:j + k], m
    return best


def simulate(ctx, cont, k, draft):
    hist = list(ctx)
    i = steps = drafted = accepted = 0
    while i < len(cont):
        kk = min(k, len(cont) - i - 1)
        d = draft(hist, kk) if kk > 0 else []
        n = 0
        while n < len(d) and d[n] == cont[i + n]:
            n += 1
        drafted += len(d)
        accepted += n
        steps += 1
        hist.extend(cont[i:i + n + 1])
        i += n + 1
    return steps, drafted, accepted


def main():
    ids = [int(x) for x in open(sys.argv[1]).read().split()]
    cells = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
    nmaxes = [int(x) for x in sys.argv[3:]] or [1, 2, 3, 4]
    # Longest match capped at C tokens == "for n = C..1, the latest occurrence of the last n tokens"
    # (polykv before 2026-12-01f: C = 3; after: C = 32).
    variants = {"cap %d" % c: (lambda c: lambda h, k: lookup_longest(h, 1, 3, k, max_back=c))(c) for c in (3, 8, 16, 32, 64)}
    variants["cap 32, min 2"] = lambda h, k: lookup_longest(h, 2, 3, k, max_back=32)
    print("| text | depth | n-max | " + " | ".join(variants) + " |")
    print("|---|---|---|" + "---|" * len(variants))
    for c in cells:
        ctx = ids[:c["depth"] + c["n_prompt"]]
        cont = c["output_ids"]
        for k in nmaxes:
            row = []
            for f in variants.values():
                s, d, a = simulate(ctx, cont, k, f)
                row.append("%.2f (%d%%)" % (len(cont) / s, round(100 * a / max(1, d))))
            print("| %s | %d | %d | %s |" % (c.get("text_kind", "?"), c["depth"], k, " | ".join(row)))


if __name__ == "__main__":
    main()
