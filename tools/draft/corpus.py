"""The training text: every *.py file under the Python installation's site-packages (the kind of data
the embedded model was trained on), deduplicated by the sha256 of its bytes; held out (never trained
on): files whose sha256's first 8 hex digits, as an integer, are 0 mod 100 -- the embedded model's
held-out split, so the evaluation text is unseen by the target too. Token streams are, per file in
sha256 order, [BOS] + ids + [EOS] as uint16."""
import hashlib
import os
import sysconfig

import numpy as np

BOS_ID, EOS_ID = 1, 2


def default_roots():
    roots = set()
    for k in ("purelib", "platlib"):
        p = sysconfig.get_paths().get(k)
        if p and os.path.isdir(p):
            roots.add(os.path.realpath(p))
    try:
        import torch
        roots.add(os.path.realpath(os.path.dirname(os.path.dirname(torch.__file__))))
    except ImportError:
        pass
    return sorted(roots)


def read_files(roots, max_bytes=1_000_000, max_line=10_000, max_files=0):
    """-> {sha256 hex: text} of the usable files (utf-8, non-empty, no line over max_line chars)."""
    texts, seen = {}, set()
    for root in roots:
        for dp, dns, fns in os.walk(root):
            dns.sort()
            for fn in sorted(fns):
                if not fn.endswith(".py"):
                    continue
                p = os.path.join(dp, fn)
                if os.path.islink(p) or not os.path.isfile(p):
                    continue
                try:
                    if not 0 < os.path.getsize(p) <= max_bytes:
                        continue
                    with open(p, "rb") as f:
                        b = f.read()
                except OSError:
                    continue
                h = hashlib.sha256(b).hexdigest()
                if h in seen:
                    continue
                seen.add(h)
                try:
                    s = b.decode("utf-8")
                except UnicodeDecodeError:
                    continue
                if not s.strip() or max(len(x) for x in s.split("\n")) > max_line:
                    continue
                texts[h] = s
                if max_files and len(texts) >= max_files:
                    return texts
    return texts


def split(texts):
    hashes = sorted(texts)
    held = [h for h in hashes if int(h[:8], 16) % 100 == 0]
    train = [h for h in hashes if int(h[:8], 16) % 100 != 0]
    return train, held


def encode(sp, texts, threads=16):
    arrs = []
    for i in range(0, len(texts), 1024):
        chunk = texts[i:i + 1024]
        try:
            enc = sp.encode(chunk, num_threads=threads)
        except TypeError:  # sentencepiece < 0.2: no num_threads
            enc = sp.encode(chunk)
        for e in enc:
            a = np.empty(len(e) + 2, np.uint16)
            a[0], a[1:-1], a[-1] = BOS_ID, e, EOS_ID
            arrs.append(a)
    return np.concatenate(arrs) if arrs else np.zeros(0, np.uint16)
