#!/usr/bin/env python3
"""Generates tests/data/quant/: reference quantized blocks and dequantized floats made by gguf-py
(the numpy implementation of ggml's block formats that ships with llama.cpp), so that polykv's
quantize/dequantize reference is checked against an implementation nobody here wrote.

How the checked-in files were made:
    PYTHONPATH=<llama.cpp checkout>/gguf-py /usr/bin/python3 tools/make_quant_refs.py
(gguf-py from llama.cpp commit c392e5094deaf2d1a7c18683214f007fad3fe42b, numpy 1.24). This script
only calls gguf.quants; it contains no format code of its own beyond picking random bytes.

Files (all little-endian, no headers):
    input_a.f32, input_b.f32     rows of 512 and 256 float32 inputs (see make_inputs)
    <type>_<row>.bin             gguf.quants.quantize(input_<row>, type) bytes
    <type>_<row>.deq.f32         gguf.quants.dequantize of those bytes
    <type>_random.bin            random blocks (any bit pattern, finite fp16 scales)
    <type>_random.deq.f32        gguf.quants.dequantize of the random blocks
<type> is ggml's lower-case name (q4_0, q4_K, bf16, ...). gguf-py has no quantizer for the k-quants,
so those get only random blocks.
"""
import os
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "quant")

QUANTIZED_TYPES = [T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0]
BLOCK_TYPES = [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K]
RANDOM_BLOCKS = 4

# Byte offsets of the fp16 scale fields in each block layout (ggml's block_* structs).
FP16_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}


def type_name(t: T) -> str:
    return t.name.lower().replace("_k", "_K")


def make_inputs(rng: np.random.Generator) -> dict[str, np.ndarray]:
    # Row a: unit normal with a few large outliers (as in activations).
    a = rng.standard_normal(512).astype(np.float32)
    a[rng.choice(512, 6, replace=False)] *= 12.0
    # Row b: small weights-like values; block 2 all zeros, block 3 constant, block 5 all negative,
    # block 6 spans a tiny range (fp16 scales near the subnormal range).
    b = (0.02 * rng.standard_normal(256)).astype(np.float32)
    b[64:96] = 0.0
    b[96:128] = 0.375
    b[160:192] = -np.abs(b[160:192]) - 0.01
    b[192:224] = (1e-5 * rng.standard_normal(32)).astype(np.float32)
    return {"a": a, "b": b}


def random_blocks(rng: np.random.Generator, t: T) -> np.ndarray:
    block_size, type_size = quants.GGML_QUANT_SIZES[t]
    blocks = rng.integers(0, 256, size=(RANDOM_BLOCKS, type_size), dtype=np.uint8)
    for off in FP16_FIELDS[t]:
        # finite scales of either sign, magnitude 1e-4 .. 1
        mag = np.exp(rng.uniform(np.log(1e-4), 0.0, RANDOM_BLOCKS))
        sign = rng.choice([-1.0, 1.0], RANDOM_BLOCKS)
        blocks[:, off:off + 2] = (sign * mag).astype(np.float16).view(np.uint8).reshape(-1, 2)
    return blocks.reshape(-1)


def save(name: str, arr: np.ndarray) -> None:
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(np.ascontiguousarray(arr).tobytes())


def main() -> int:
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(20240611)
    inputs = make_inputs(rng)
    for row, x in inputs.items():
        save(f"input_{row}.f32", x)
        for t in QUANTIZED_TYPES:
            q = np.asarray(quants.quantize(x, t)).view(np.uint8).reshape(-1)
            deq = quants.dequantize(q, t).astype(np.float32)
            save(f"{type_name(t)}_{row}.bin", q)
            save(f"{type_name(t)}_{row}.deq.f32", deq)
    for t in BLOCK_TYPES:
        q = random_blocks(rng, t)
        deq = quants.dequantize(q, t).astype(np.float32)
        assert np.all(np.isfinite(deq)), t.name
        save(f"{type_name(t)}_random.bin", q)
        save(f"{type_name(t)}_random.deq.f32", deq)
    total = sum(os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT))
    print(f"wrote {len(os.listdir(OUT))} files, {total} bytes, to {os.path.normpath(OUT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
