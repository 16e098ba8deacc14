#!/usr/bin/env python3
"""Generates tests/data/ternary/: ternary blocks and their values made by a numpy model of the layouts,
written here from the formats' definitions (gguf-py's TQ1_0 / TQ2_0 quantize_blocks and
dequantize_blocks; PrismML's llama.cpp fork's block_ptq1_0, quantize_row_ptq1_0_ref and
dequantize_row_ptq1_0, ggml type 143), read for their rules, not copied. It shares no code with
polykv's C++ (src/quant/ternary.cpp), so the test (tests/ternary_quant_test.cpp) compares two
independent readings of the same rules.

    /usr/bin/python3 tools/make_ternary_refs.py     (numpy only)

Files (little-endian, no headers):
    input.f32               1024 float32 inputs (random normals, one all-zero block of 256, exact ternary runs)
    <type>_input.bin        the inputs quantized (max-abs scale, round half away from zero)
    <type>_input.deq.f32    those blocks dequantized
    <type>_random.bin       random blocks (every byte random except a finite fp16 scale)
    <type>_random.deq.f32   those blocks dequantized
"""
import os

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "ternary")
# type name -> (values per block, bytes per block, qs bytes, qh bytes); tq2_0 is not base-3.
LAYOUTS = {"tq1_0": (256, 54, 48, 4), "tq2_0": (256, 66, 64, 0), "ptq1_0": (128, 28, 24, 2)}


def stages(n_qs):
    """Widths of the qs stages: as many 32-, then 16-, then 8-byte stages as fit."""
    out, left = [], n_qs
    for c in (32, 16, 8):
        while left >= c:
            out.append(c)
            left -= c
    return out


def digits_of(byte, count):
    """The `count` base-3 digits of a packed byte, digit n = ((byte * 3^n mod 256) * 3) >> 8."""
    return [(((int(byte) * 3 ** n) % 256) * 3) >> 8 for n in range(count)]


def block_codes(kind, blk):
    """Codes 0..3 of one block in value order."""
    n, size, n_qs, n_qh = LAYOUTS[kind]
    if kind == "tq2_0":
        qs = blk[:64]
        return [(int(qs[32 * (v // 128) + v % 32]) >> (2 * ((v % 128) // 32))) & 3 for v in range(256)]
    qs, qh = blk[:n_qs], blk[n_qs:n_qs + n_qh]
    codes, j = [], 0
    for c in stages(n_qs):
        d = [digits_of(qs[j + m], 5) for m in range(c)]
        codes += [d[m][k] for k in range(5) for m in range(c)]
        j += c
    d = [digits_of(qh[h], 4) for h in range(n_qh)]
    codes += [d[h][k] for k in range(4) for h in range(n_qh)]
    assert len(codes) == n
    return codes


def dequantize(kind, data):
    n, size, _, _ = LAYOUTS[kind]
    out = []
    for b in range(len(data) // size):
        blk = data[b * size:(b + 1) * size]
        d = np.frombuffer(bytes(blk[size - 2:]), dtype=np.float16).astype(np.float32)[0]
        out += [np.float32(c - 1) * d for c in block_codes(kind, blk)]
    return np.array(out, dtype=np.float32)


def round_away(v):
    """Round half away from zero (C's lroundf), in float64 where |v| + 0.5 is exact."""
    a = np.abs(v.astype(np.float64))
    return np.sign(v) * np.floor(a + 0.5)


def pack(codes, count):
    q = 0
    for c in codes:
        q = q * 3 + int(c)
    if count == 4:
        q *= 3
    return (q * 256 + 242) // 243


def quantize(kind, x):
    n, size, n_qs, n_qh = LAYOUTS[kind]
    out = bytearray()
    for b in range(len(x) // n):
        v = x[b * n:(b + 1) * n].astype(np.float32)
        d = np.float32(np.max(np.abs(v)))
        inv = np.float32(0) if d == 0 else np.float32(1) / d
        codes = np.clip(round_away(v * inv).astype(np.int64) + 1, 0, 2)
        blk = bytearray(size)
        if kind == "tq2_0":
            for c in range(2):
                for j in range(32):
                    blk[32 * c + j] = sum(int(codes[128 * c + 32 * k + j]) << (2 * k) for k in range(4))
        else:
            j, v0 = 0, 0
            for c in stages(n_qs):
                for m in range(c):
                    blk[j + m] = pack([codes[v0 + k * c + m] for k in range(5)], 5)
                j += c
                v0 += 5 * c
            for h in range(n_qh):
                blk[n_qs + h] = pack([codes[v0 + k * n_qh + h] for k in range(4)], 4)
        blk[size - 2:] = np.array([d], dtype=np.float16).tobytes()
        out += blk
    return bytes(out)


def make_inputs(rng):
    x = rng.standard_normal(1024).astype(np.float32)
    x[256:512] = 0.0                                                   # an all-zero block
    x[512:640] = (rng.integers(-1, 2, 128) * 0.375).astype(np.float32)  # exactly ternary (lossless)
    x[700] = 0.0
    return x


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(20261201)
    x = make_inputs(rng)
    x.tofile(os.path.join(OUT, "input.f32"))
    for kind, (n, size, _, _) in LAYOUTS.items():
        q = quantize(kind, x)
        open(os.path.join(OUT, f"{kind}_input.bin"), "wb").write(q)
        dequantize(kind, q).tofile(os.path.join(OUT, f"{kind}_input.deq.f32"))
        blocks = bytearray(rng.integers(0, 256, 4 * size, dtype=np.uint8).tobytes())
        for b in range(4):
            scale = np.float32(rng.uniform(-2.0, 2.0))
            blocks[b * size + size - 2:(b + 1) * size] = np.array([scale], dtype=np.float16).tobytes()
        open(os.path.join(OUT, f"{kind}_random.bin"), "wb").write(bytes(blocks))
        dequantize(kind, blocks).tofile(os.path.join(OUT, f"{kind}_random.deq.f32"))


if __name__ == "__main__":
    main()
