#!/usr/bin/python3
"""Lloyd–Max (MSE-optimal) scalar quantizer levels for the standard normal N(0, 1).

Produces the constants of src/quant/turbo_codebook.cpp (gaussian_codebook) for 4, 8 and 16 levels.
Run with Debian's /usr/bin/python3 (standard library only; no numpy needed):

    /usr/bin/python3 tools/lloyd_max.py

Lloyd's iteration with exact integrals of the normal density:
  boundaries  t_i = (c_i + c_{i+1}) / 2          (t_0 = -inf, t_L = +inf)
  centroids   c_i = E[X | t_{i-1} < X < t_i] = (phi(t_{i-1}) - phi(t_i)) / (Phi(t_i) - Phi(t_{i-1}))
iterated until no level moves by more than 1e-15 (i.e. converged to ~1e-12 or better).
At a fixed point the MSE is E[X^2] - sum_i p_i c_i^2 = 1 - sum_i p_i c_i^2.
"""
import math


def phi(x):
    return 0.0 if math.isinf(x) else math.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)


def Phi(x):
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def lloyd_step(c):
    t = [-math.inf] + [(c[i] + c[i + 1]) / 2 for i in range(len(c) - 1)] + [math.inf]
    out = []
    for i in range(len(c)):
        p = Phi(t[i + 1]) - Phi(t[i])
        out.append((phi(t[i]) - phi(t[i + 1])) / p)
    return out


def mse(c):
    t = [-math.inf] + [(c[i] + c[i + 1]) / 2 for i in range(len(c) - 1)] + [math.inf]
    # Exact E[(X - c_i)^2 ; t_{i-1} < X < t_i] summed: uses int x^2 phi = Phi - x phi.
    total = 0.0
    for i in range(len(c)):
        a, b = t[i], t[i + 1]
        p = Phi(b) - Phi(a)
        m1 = phi(a) - phi(b)                                  # int x phi
        xa = 0.0 if math.isinf(a) else a * phi(a)
        xb = 0.0 if math.isinf(b) else b * phi(b)
        m2 = p + xa - xb                                      # int x^2 phi
        total += m2 - 2 * c[i] * m1 + c[i] * c[i] * p
    return total


def lloyd_max(levels):
    # Start from evenly spaced levels across +-2.5 sigma.
    c = [-2.5 + 5.0 * (i + 0.5) / levels for i in range(levels)]
    for it in range(1, 1000000):
        n = lloyd_step(c)
        n = [(n[i] - n[levels - 1 - i]) / 2 for i in range(levels)]  # enforce exact symmetry
        delta = max(abs(a - b) for a, b in zip(n, c))
        c = n
        if delta < 1e-15:
            return c, it
    raise RuntimeError("no convergence")


if __name__ == "__main__":
    for bits in (2, 3, 4):
        c, iters = lloyd_max(1 << bits)
        print(f"// {1 << bits} levels ({bits} bits): {iters} Lloyd iterations, MSE = {mse(c):.12f}")
        print("{" + ", ".join(f"{v:.17g}" for v in c) + "},")
