#!/usr/bin/env python3
"""Writes tests/data/quant/kquant_input.f32: 20 super-blocks (256 float32 values each, little-endian)
of awkward distributions for the k-quant golden test (tests/kquant_quantize_test.cpp). Seeded and
pure Python; the file is committed, so the exact floats only matter through it.
usage: tools/ggml_quant_oracle/make_kquant_input.py OUT.f32"""
import math
import random
import struct
import sys

QK_K = 256
rng = random.Random(20261130)


def normal(scale=1.0, mean=0.0):
    return [rng.gauss(mean, scale) for _ in range(QK_K)]


def with_outliers(xs, every, factor):
    return [x * factor if i % every == 0 else x for i, x in enumerate(xs)]


def mixed_sub_blocks():
    # per 32-value sub-block (q4_K/q5_K) and 16-value group (q2_K/q3_K/q6_K): zero, constant < 0,
    # constant > 0, normal, tiny, one spike
    out = []
    for s in range(QK_K // 32):
        kind = s % 6
        if kind == 0:
            out += [0.0] * 32
        elif kind == 1:
            out += [-0.375] * 32
        elif kind == 2:
            out += [0.5] * 32
        elif kind == 3:
            out += [rng.gauss(0.0, 1.0) for _ in range(32)]
        elif kind == 4:
            out += [rng.gauss(0.0, 1e-4) for _ in range(32)]
        else:
            out += [0.0] * 31 + [2.0]
    return out


blocks = [
    normal(), normal(), normal(), normal(),                 # 0-3: N(0, 1)
    normal(0.02), normal(0.02),                             # 4-5: weight-like scale
    with_outliers(normal(), 37, 20.0), with_outliers(normal(0.05), 11, -8.0),  # 6-7: outliers
    [0.0] * QK_K,                                           # 8: all zero
    [0.75] * QK_K,                                          # 9: constant > 0
    [-1.25] * QK_K,                                         # 10: constant < 0
    mixed_sub_blocks(),                                     # 11
    [rng.random() for _ in range(QK_K)],                    # 12: all >= 0
    [-rng.random() for _ in range(QK_K)],                   # 13: all <= 0
    normal(1e-6),                                           # 14: tiny (fp16-subnormal scales)
    [rng.gauss(0.0, 1.0) ** 3 for _ in range(QK_K)],        # 15: heavy tails
    [0.25 * rng.randint(-8, 8) for _ in range(QK_K)],       # 16: on a grid (rounding ties)
    [3.0 if i == 77 else 0.0 for i in range(QK_K)],         # 17: one spike
    normal(0.3, 0.5),                                       # 18: offset mean
    normal(1000.0),                                         # 19: large
]
assert all(len(b) == QK_K for b in blocks)
with open(sys.argv[1], "wb") as f:
    for b in blocks:
        f.write(struct.pack("<%df" % QK_K, *b))
