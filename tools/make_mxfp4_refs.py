#!/usr/bin/env python3
"""Generates tests/data/mxfp4/: MXFP4 blocks (ggml type 39) and their values made by a numpy model
written here from the format's definitions: the OCP Microscaling spec v1.0 (E2M1 elements: sign,
2 exponent bits with bias 1, 1 mantissa bit, subnormal at exponent 0; E8M0 scale 2^(e - 127)) and
ggml's block layout and quantizer rules (ggml-common.h block_mxfp4: e then qs[16], value j in the
low nibble of qs[j], value j + 16 in its high nibble; ggml-quants.c quantize_row_mxfp4_ref: e =
floor(log2(amax)) - 2 + 127, nearest code with ties to the lower code). Read for their rules, not
copied. E2M1 is decoded arithmetically here, not with ggml's doubled-value table, and the scale as
2^(e - 127) with float64 ldexp; it shares no code with polykv's C++ (src/quant/mxfp4.cpp).

    /usr/bin/python3 tools/make_mxfp4_refs.py     (numpy only)

Files (little-endian, no headers):
    input.f32            1024 float32 inputs (random normals of several scales, an all-zero block,
                         exact E2M1 multiples, ties between two codes, values that saturate)
    input.bin            the inputs quantized (17 bytes per block of 32)
    input.deq.f32        those blocks dequantized
    random.bin           1024 random blocks (every byte random, e in 100..154 so values stay normal)
    random.deq.f32       those blocks dequantized
    extreme.bin          blocks with e = 0, 1, 2, 127, 128, 253, 254, 255 and every code
    extreme.deq.f32      those blocks dequantized
"""
import os

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "mxfp4")
QK = 32


def e2m1(code):
    """Value of a 4-bit E2M1 code (OCP MX v1.0, section 5.3.3)."""
    sign = -1.0 if code & 8 else 1.0
    exp, man = (code >> 1) & 3, code & 1
    if exp == 0:
        return sign * man * 0.5  # subnormal: 2^(1 - bias) * 0.m, bias 1
    return sign * 2.0 ** (exp - 1) * (1.0 + man * 0.5)


E2M1 = np.array([e2m1(c) for c in range(16)], dtype=np.float64)


def dequantize(blocks):
    """blocks: uint8 [n, 17] -> float32 [n * 32]."""
    e = blocks[:, 0].astype(np.int64)
    scale = np.ldexp(1.0, e - 127)  # E8M0 (e = 255, NaN in OCP, is read as ggml reads it: 2^128)
    qs = blocks[:, 1:]
    codes = np.concatenate([qs & 0x0F, qs >> 4], axis=1)  # values 0..15 low nibbles, 16..31 high
    with np.errstate(over="ignore"):  # 6 * 2^128 (e = 255) is inf in float32, as in ggml
        return (E2M1[codes] * scale[:, None]).astype(np.float32).reshape(-1)


def quantize(x):
    """float32 [n * 32] -> uint8 [n, 17] by ggml's rule."""
    x = x.reshape(-1, QK).astype(np.float32)
    out = np.zeros((x.shape[0], 17), dtype=np.uint8)
    for i, blk in enumerate(x):
        amax = float(np.max(np.abs(blk)))
        e = int(np.floor(np.log2(np.float32(amax)))) - 2 + 127 if amax > 0 else 0
        e = min(max(e, 0), 255)
        scale = np.float32(np.ldexp(1.0, e - 127))
        # ggml compares |kvalue * half_scale - x| in float32: the same numbers as E2M1 * scale.
        cand = (E2M1.astype(np.float32) * scale).astype(np.float32)
        codes = [int(np.argmin(np.abs(cand - v))) for v in blk]  # argmin: the first (lowest) code on ties
        out[i, 0] = e
        for j in range(16):
            out[i, 1 + j] = codes[j] | (codes[j + 16] << 4)
    return out


def write(name, arr):
    arr.tofile(os.path.join(OUT, name))


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(39)
    x = np.concatenate([rng.standard_normal(256) * s for s in (1.0, 0.02)] + [rng.standard_normal(256) * 300.0])
    x = np.concatenate([x, np.zeros(256)]).astype(np.float32)  # 1024 values
    x[768:800] = 0.0                                            # an all-zero block
    x[800:832] = E2M1[np.arange(32) % 16] * 0.125               # exact multiples
    mids = (E2M1[0:7] + E2M1[1:8]) / 2                          # midpoints of neighbouring magnitudes
    x[832:864] = np.concatenate([[6.0], mids, -mids, mids, -mids, [-6.0, 4.5, -4.5]])  # amax 6: scale 1, ties
    x[864:896] = rng.standard_normal(32) * 7.0
    x[864] = 15.9  # above 12 * half scale: saturates to the largest code
    x[896:1024] = rng.standard_normal(128).astype(np.float32) * 1e-3
    write("input.f32", x.astype(np.float32))
    q = quantize(x)
    write("input.bin", q)
    write("input.deq.f32", dequantize(q))

    r = rng.integers(0, 256, size=(1024, 17), dtype=np.uint8)
    r[:, 0] = rng.integers(100, 155, size=1024, dtype=np.uint8)
    write("random.bin", r)
    write("random.deq.f32", dequantize(r))

    ex = np.zeros((8, 17), dtype=np.uint8)
    ex[:, 0] = [0, 1, 2, 127, 128, 253, 254, 255]
    ex[:, 1:] = (np.arange(16) | (((np.arange(16) * 7) % 16) << 4)).astype(np.uint8)
    write("extreme.bin", ex)
    write("extreme.deq.f32", dequantize(ex))


if __name__ == "__main__":
    main()
