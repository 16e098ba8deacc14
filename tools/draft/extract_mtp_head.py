#!/usr/bin/python3
"""Writes the head-only GGUF (for `--model-mtp FILE`) from an MTP variant of a model.

The variant holds the target's tensors plus the nextn block N = block_count - nextn_predict_layers
(blk.N.* and blk.N.nextn.*, llama.cpp's layout). The output holds only that block's tensors (raw bytes,
types unchanged) and the metadata polykv checks against the target: general.* and every
<arch>.* key (block_count stays N + 1, nextn_predict_layers, embedding_length, ...); tokenizer.* is
dropped (the head shares the target's vocabulary and embeddings).

usage: extract_mtp_head.py VARIANT.gguf OUT.gguf"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_io  # noqa: E402


def extract(src, dst):
    r = gguf_io.Reader(src)
    arch = r.meta("general.architecture")
    nextn = int(r.meta(f"{arch}.nextn_predict_layers", 0))
    if nextn < 1:
        raise gguf_io.GgufError(f"{src}: {arch}.nextn_predict_layers is {nextn}: no MTP head in this file")
    n_layer = int(r.meta(f"{arch}.block_count")) - nextn
    prefix = f"blk.{n_layer}."
    w = gguf_io.Writer()
    for k, t, v in r.kv:
        if k.startswith("general.") or k.startswith(arch + "."):
            w.set(k, t, v)
    w.set("general.name", gguf_io.STR, str(r.meta("general.name", "model")) + " MTP head")
    names = [t["name"] for t in r.tensors if t["name"].startswith(prefix)]
    if not any(n.startswith(prefix + "nextn.") for n in names):
        raise gguf_io.GgufError(f"{src}: no {prefix}nextn.* tensors")
    for n in names:
        t = r.by_name[n]
        w.add_raw(n, t["ne"], t["type"], r.raw(n))
    w.write(dst)
    return names


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    got = extract(sys.argv[1], sys.argv[2])
    print(f"wrote {sys.argv[2]}: {len(got)} tensors ({', '.join(got)})")
