#!/usr/bin/python3
"""Codebooks of the trellis-coded turbo types (turbo2t / turbo3t / turbo4t): 2^(bits+1) levels for
the 8-state trellis of src/quant/turbo_trellis.h, fitted to the coordinates turbo rows quantize.

Run with Debian's /usr/bin/python3 (needs python3-numpy); takes a few minutes per bit width:

    /usr/bin/python3 tools/tcq_codebook.py 3      # bits: 2, 3 or 4

Data: random unit vectors of 128 dims scaled by sqrt(128) (a rotated, normalized turbo group is
uniform on that sphere; its coordinates are near N(0, 1)). Generalized Lloyd iteration: encode with
the Viterbi algorithm (the same trellis and subset rule as the C++ encoder), move every level to the
mean of the coordinates coded with it, symmetrize (c_k = -c_{L-1-k}), repeat. Start: the
L = 2^(bits+1)-level Lloyd-Max codebook of N(0, 1). Subset s holds levels s, s+4, s+8, ...
Prints the levels and the mean squared error per coordinate on held-out vectors, next to the
2^bits-level Lloyd-Max quantizer's (plain turbo<bits>).
"""
import sys

import numpy as np

N_TRAIN, N_TEST, DIM, ITERATIONS = 4000, 2000, 128, 25
STATES = 8


def subset_of_window(w):
    """w = t_{i-3} | t_{i-2} << 1 | t_{i-1} << 2 | t_i << 3 -> subset 0..3 (turbo_trellis.h)."""
    parity = lambda v: bin(v).count("1") & 1
    return 2 * parity(w & 15) + parity(w & 4)


SUBSET = [subset_of_window(w) for w in range(16)]


def sphere(n, seed):
    x = np.random.default_rng(seed).standard_normal((n, DIM))
    return x / np.linalg.norm(x, axis=1, keepdims=True) * np.sqrt(DIM)


def lloyd_max(levels, seed=7, iterations=100):
    x = np.sort(np.random.default_rng(seed).standard_normal(400000))
    c = np.quantile(x, (np.arange(levels) + 0.5) / levels)
    for _ in range(iterations):
        idx = np.searchsorted((c[1:] + c[:-1]) / 2, x)
        c = np.array([x[idx == k].mean() for k in range(levels)])
    return c


def viterbi(x, codebook):
    """x: [n, DIM]. Returns (mean squared error, level index [n, DIM]) of the best trellis path."""
    n = x.shape[0]
    subsets = [codebook[s::4] for s in range(4)]  # subset s = levels s, s+4, s+8, ...
    dist = np.stack([(x[:, :, None] - subsets[s][None, None, :]) ** 2 for s in range(4)], 2)  # [n, DIM, 4, L/4]
    err, best = dist.min(3), dist.argmin(3)  # [n, DIM, 4]
    cost = np.full((n, STATES), np.inf)
    cost[:, 0] = 0.0
    back = np.zeros((DIM, n, STATES), dtype=np.int8)  # dropped oldest bit of the best predecessor
    for i in range(DIM):
        new = np.full((n, STATES), np.inf)
        for ns in range(STATES):
            for old in (0, 1):
                w = ((ns << 1) | old) & 15
                c = cost[:, w & 7] + err[:, i, SUBSET[w]]
                better = c < new[:, ns]
                new[:, ns] = np.where(better, c, new[:, ns])
                back[i, :, ns] = np.where(better, old, back[i, :, ns])
        cost = new
    state = cost.argmin(1)
    level = np.zeros((n, DIM), dtype=int)
    rows = np.arange(n)
    for i in range(DIM - 1, -1, -1):
        w = ((state << 1) | back[i, rows, state]) & 15
        s = np.array(SUBSET)[w]
        level[:, i] = s + 4 * best[rows, i, s]
        state = w & 7
    return cost.min(1).sum() / (n * DIM), level


def main():
    bits = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    assert bits in (2, 3, 4)
    levels = 2 ** (bits + 1)
    train, test = sphere(N_TRAIN, 1), sphere(N_TEST, 2)
    codebook = lloyd_max(levels)
    for it in range(ITERATIONS):
        mse, level = viterbi(train, codebook)
        c = np.array([train[level == k].mean() for k in range(levels)])
        codebook = (c - c[::-1]) / 2
        print(f"iteration {it:2d}: train MSE {mse:.6f}")
    lm = lloyd_max(2 ** bits)
    scalar = lm[np.abs(test[..., None] - lm).argmin(-1)]
    print(f"held-out MSE: trellis {viterbi(test, codebook)[0]:.6f}, "
          f"{2 ** bits}-level Lloyd-Max {np.mean((test - scalar) ** 2):.6f}")
    print("levels:", ", ".join(f"{v:.6f}" for v in codebook))


if __name__ == "__main__":
    main()
