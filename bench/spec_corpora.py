#!/usr/bin/python3
"""Builds the three texts of the speculative-decoding sweep (bench/spec_sweep.sh) into OUT_DIR, from the
fixtures only, deterministically (the same bytes on every machine):
  code.txt  held-out Python: ../shared/fixtures/models/trained/ppl_dev.txt as is (16 rows of 2048 tokens).
  prose.txt the docstrings and comments of that held-out Python, in order. Extracted per row
            (ppl_dev_ids.i32 decoded with the fixtures' SentencePiece model): a row that starts inside a
            docstring (an odd number of triple quotes) drops the fragment before its first triple quote;
            shebangs, decorative comment rules and empty strings are left out.
  shell.txt a shell-session transcript generated from the held-out rows (seeded, no machine files):
            per row, the commands a developer would type about it (cd, git status, grep -n of its
            def/class lines with their real line numbers, wc -l, ls -l, pytest -q with the row's real
            test names, py_compile loops, export, du, git log) and their plausible output. The names,
            paths and matched lines are the held-out code's own; sizes, times, hashes and test outcomes
            come from random.Random(2026). Cycled over the rows until it is over 160 KB.
Usage: spec_corpora.py FIXTURES_TRAINED_DIR OUT_DIR   (/usr/bin/python3: needs python3-sentencepiece, numpy)"""
import hashlib
import os
import random
import re
import sys

import numpy as np
import sentencepiece as spm

TRIPLE = re.compile(r'("""|\'\'\')')


def rows_text(trained):
    sp = spm.SentencePieceProcessor(model_file=os.path.join(trained, "hf_tokenizer.model"))
    ids = np.fromfile(os.path.join(trained, "ppl_dev_ids.i32"), dtype="<i4").reshape(16, 2048)
    return [sp.decode([int(t) for t in row]) for row in ids]


def prose_of(src):
    """Docstrings (triple-quoted strings) and comments of one row, in order of appearance."""
    if len(TRIPLE.findall(src)) % 2 == 1:  # starts inside a string: drop the fragment
        m = TRIPLE.search(src)
        src = src[m.end():]
    pieces = []  # (offset, text)
    spans = []
    for m in re.finditer(r'("""|\'\'\')(.*?)\1', src, re.S):
        spans.append((m.start(), m.end()))
        t = m.group(2).strip()
        if t:
            pieces.append((m.start(), "doc", t))
    pos = 0
    for line in src.splitlines(keepends=True):
        s = line.strip()
        inside = any(a <= pos < b for a, b in spans)
        if not inside and s.startswith("#") and not s.startswith("#!"):
            t = s.lstrip("#").strip()
            if t and not re.fullmatch(r"[-=*#~_\W]+", t):  # no decorative rules
                pieces.append((pos, "comment", t))
        pos += len(line)
    pieces.sort()
    out = ""
    for i, (_, kind, t) in enumerate(pieces):  # a run of comment lines is one paragraph
        if i:
            out += "\n" if kind == "comment" and pieces[i - 1][1] == "comment" else "\n\n"
        out += t
    return out


def module_paths(src, rng):
    paths = []
    for m in re.finditer(r"^(?:from|import) ([a-zA-Z_][\w.]*)", src, re.M):
        p = m.group(1).replace(".", "/") + ".py"
        if p not in paths:
            paths.append(p)
    if not paths:
        paths = ["src/module_%d.py" % rng.randrange(100)]
    return paths


def shell_block(src, row, rng):
    """One session about one held-out row: returns lines of text."""
    lines = src.splitlines()
    mods = module_paths(src, rng)
    target = mods[rng.randrange(len(mods))]
    tests = re.findall(r"^def (test_\w+)", src, re.M)
    defs = [(i + 1, l) for i, l in enumerate(lines) if re.match(r"\s*(def|class) \w+", l)]
    d = os.path.dirname(target) or "."
    out = []
    out.append("$ cd ~/src/heldout-%02d && git status --short" % row)
    for p in mods[:rng.randrange(1, 4)]:
        out.append("%s %s" % (rng.choice([" M", " M", "??", "A "]), p))
    out.append("$ wc -l %s" % target)
    out.append("%d %s" % (len(lines), target))
    out.append('$ grep -n "^\\s*\\(def\\|class\\) " %s | head -%d' % (target, min(20, max(1, len(defs)))))
    for n, l in defs[:20]:
        out.append("%d:%s" % (n, l))
    out.append("$ ls -l %s" % d)
    out.append("total %d" % (4 * (len(mods) + 2)))
    for p in sorted(set(os.path.basename(x) for x in mods if (os.path.dirname(x) or ".") == d) | {"__init__.py"}):
        size = rng.randrange(0, 40000) if p != "__init__.py" else rng.choice([0, 0, 213, 1024])
        out.append("-rw-r--r-- 1 dev dev %6d Nov %2d %02d:%02d %s" % (size, rng.randrange(1, 31), rng.randrange(24),
                                                                   rng.randrange(60), p))
    if tests:
        tf = "tests/test_%s" % os.path.basename(target)
        out.append("$ python3 -m pytest -q %s" % tf)
        fails = [t for t in tests if rng.random() < 0.15]
        out.append("".join("F" if t in fails else "." for t in tests).ljust(72) + "[100%]")
        for t in fails:
            out.append("FAILED %s::%s - AssertionError: assert %d == %d" % (tf, t, rng.randrange(10), rng.randrange(10)))
        out.append("%s%d passed in %.2fs" % ("%d failed, " % len(fails) if fails else "", len(tests) - len(fails),
                                             rng.uniform(0.05, 9.0)))
    out.append('$ for f in %s/*.py; do python3 -m py_compile "$f" && echo "ok $f"; done' % d)
    for p in mods[:6]:
        if (os.path.dirname(p) or ".") == d:
            out.append("ok %s" % p)
    out.append("ok %s/__init__.py" % d)
    out.append("$ export PYTHONPATH=$HOME/src/heldout-%02d:$PYTHONPATH" % row)
    out.append("$ du -sh %s build" % d)
    out.append("%dK\t%s" % (rng.randrange(4, 900), d))
    out.append("%.1fM\tbuild" % rng.uniform(0.5, 80))
    out.append("$ git log --oneline -%d -- %s" % (min(5, max(1, len(defs))), target))
    for n, l in defs[:5]:
        name = re.match(r"\s*(?:def|class) (\w+)", l).group(1)
        h = hashlib.sha1(("%d %s %d" % (row, name, n)).encode()).hexdigest()[:7]
        out.append("%s %s %s" % (h, rng.choice(["Fix", "Refactor", "Test", "Document", "Speed up"]), name))
    return out


def main():
    trained, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    code = open(os.path.join(trained, "ppl_dev.txt"), encoding="utf-8").read()
    open(os.path.join(out_dir, "code.txt"), "w", encoding="utf-8").write(code)
    rows = rows_text(trained)
    prose = "\n\n".join(p for p in (prose_of(r) for r in rows) if p)
    open(os.path.join(out_dir, "prose.txt"), "w", encoding="utf-8").write(prose + "\n")
    rng = random.Random(2026)
    shell, size, cycle = [], 0, 0
    while size < 160_000:
        for i, r in enumerate(rows):
            block = "\n".join(shell_block(r, i + 16 * cycle, rng))
            shell.append(block)
            size += len(block)
        cycle += 1
    open(os.path.join(out_dir, "shell.txt"), "w", encoding="utf-8").write("\n".join(shell) + "\n")
    for name in ("code", "prose", "shell"):
        print(name, os.path.getsize(os.path.join(out_dir, name + ".txt")), "bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
