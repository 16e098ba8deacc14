#!/usr/bin/env python3
"""Builds the three texts of the speculative-decoding sweep (bench/spec_sweep.sh) into OUT_DIR:
  code.txt  held-out Python: ../shared/fixtures/models/trained/ppl_dev.txt as is;
  prose.txt its docstrings and comments (in order), then, so that depth 16384 fits, the docstrings
            and comments of the Python standard library on this machine (/usr/lib/python3.*);
  shell.txt shell scripts found on this machine (*.sh under /usr/share, /etc, /usr/bin, git-core), concatenated in sorted
            path order, each at most 32 KiB.
Usage: spec_corpora.py PPL_DEV_TXT OUT_DIR"""
import glob
import os
import re
import sys


def prose_of(src):
    out = []
    for m in re.finditer(r'("""|\'\'\')(.*?)\1', src, re.S):
        out.append(m.group(2).strip())
    for line in src.splitlines():
        s = line.strip()
        if s.startswith("#") and not s.startswith("#!"):
            out.append(s.lstrip("#").strip())
    return "\n\n".join(x for x in out if x)


def main():
    dev, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    code = open(dev, encoding="utf-8").read()
    open(os.path.join(out_dir, "code.txt"), "w", encoding="utf-8").write(code)
    prose = [prose_of(code)]
    size = len(prose[0])
    for path in sorted(glob.glob("/usr/lib/python3.*/*.py")):
        if size > 400_000:
            break
        try:
            p = prose_of(open(path, encoding="utf-8").read())
        except (UnicodeDecodeError, OSError):
            continue
        prose.append(p)
        size += len(p)
    open(os.path.join(out_dir, "prose.txt"), "w", encoding="utf-8").write("\n\n".join(prose))
    shell, size = [], 0
    paths = sorted(set(glob.glob("/usr/share/**/*.sh", recursive=True) + glob.glob("/etc/**/*.sh", recursive=True)
                       + glob.glob("/usr/bin/*.sh") + glob.glob("/usr/lib/git-core/git-*.sh")))
    for path in paths:
        if size > 400_000:
            break
        try:
            t = open(path, encoding="utf-8").read()[:32768]
        except (UnicodeDecodeError, OSError):
            continue
        shell.append(t)
        size += len(t)
    open(os.path.join(out_dir, "shell.txt"), "w", encoding="utf-8").write("\n\n".join(shell))
    for name in ("code", "prose", "shell"):
        print(name, os.path.getsize(os.path.join(out_dir, name + ".txt")), "bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
