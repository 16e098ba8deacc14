// Tests of the TurboQuant KV coding (quant/turbo.h): codebooks, rotation, round trip, rotated-basis
// kernels (scalar vs AVX2), layout, and a timing report.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numbers>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/fp16.h"
#include "core/isa.h"
#include "quant/turbo.h"
#include "quant/turbo_internal.h"
#include "test_util.h"

namespace polykv::turbo {
namespace {

const int kBits[] = {2, 3, 4};
const int kHeadDims[] = {32, 64, 128, 256, 512};

// ---- Lloyd–Max on N(0, 1), double precision, exact integrals (independent of tools/lloyd_max.py) ----

double pdf(double x) { return std::isinf(x) ? 0.0 : std::exp(-0.5 * x * x) / std::sqrt(2 * std::numbers::pi); }
double cdf(double x) { return 0.5 * (1 + std::erf(x / std::sqrt(2.0))); }

std::vector<double> boundaries(const std::vector<double>& c) {
  std::vector<double> t{-INFINITY};
  for (size_t i = 0; i + 1 < c.size(); ++i) t.push_back(0.5 * (c[i] + c[i + 1]));
  t.push_back(INFINITY);
  return t;
}

// One Lloyd step: each level moves to the centroid of its cell (nearest-level boundaries).
std::vector<double> lloyd_step(const std::vector<double>& c) {
  const std::vector<double> t = boundaries(c);
  std::vector<double> out(c.size());
  for (size_t i = 0; i < c.size(); ++i) out[i] = (pdf(t[i]) - pdf(t[i + 1])) / (cdf(t[i + 1]) - cdf(t[i]));
  return out;
}

// E[(X - Q(X))^2] for X ~ N(0,1) and nearest-level quantizer Q, exactly.
double exact_mse(const std::vector<double>& c) {
  const std::vector<double> t = boundaries(c);
  double total = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    const double a = t[i], b = t[i + 1];
    const double p = cdf(b) - cdf(a), m1 = pdf(a) - pdf(b);
    const double m2 = p + (std::isinf(a) ? 0 : a * pdf(a)) - (std::isinf(b) ? 0 : b * pdf(b));
    total += m2 - 2 * c[i] * m1 + c[i] * c[i] * p;
  }
  return total;
}

std::vector<double> lloyd_max(int n_levels) {
  std::vector<double> c(n_levels);
  for (int i = 0; i < n_levels; ++i) c[i] = -3.0 + 6.0 * (i + 0.5) / n_levels;  // not the tool's start
  for (int it = 0; it < 100000; ++it) {
    const std::vector<double> n = lloyd_step(c);
    double delta = 0;
    for (int i = 0; i < n_levels; ++i) delta = std::max(delta, std::abs(n[i] - c[i]));
    c = n;
    if (delta < 1e-15) break;
  }
  return c;
}

std::vector<double> codebook(int bits) {
  const double* c = gaussian_codebook_f64(bits);
  return std::vector<double>(c, c + (1 << bits));
}

// Lloyd–Max MSE of N(0,1) from Max (1960): 0.1175, 0.03454, 0.009497. The exact values (computed here
// and by tools/lloyd_max.py) are 0.1174818, 0.0345478, 0.0095010: Max's 16-level entry is 4e-4 low.
double literature_mse(int bits) { return bits == 2 ? 0.1175 : bits == 3 ? 0.03454 : 0.009497; }

TEST(TurboCodebook, MatchesLloydIterationInDouble) {
  for (int bits : kBits) {
    const std::vector<double> ours = lloyd_max(1 << bits), table = codebook(bits);
    const float* f = gaussian_codebook(bits);
    for (int i = 0; i < (1 << bits); ++i) {
      EXPECT_NEAR(ours[i], table[i], 1e-12) << bits << " bits, level " << i;
      EXPECT_EQ(f[i], float(table[i]));
      if (i > 0) {
        EXPECT_LT(table[i - 1], table[i]);
      }
      EXPECT_EQ(table[i], -table[(1 << bits) - 1 - i]);  // symmetric
    }
    const double mse = exact_mse(table);
    std::printf("turbo%d Lloyd-Max MSE of N(0,1): %.9f (literature %.6g)\n", bits, mse, literature_mse(bits));
    EXPECT_NEAR(mse, literature_mse(bits), 5e-4 * literature_mse(bits) + 1e-6);
  }
  EXPECT_NEAR(exact_mse(codebook(2)), 0.117481847829, 1e-11);
  EXPECT_NEAR(exact_mse(codebook(3)), 0.034547760789, 1e-11);
  EXPECT_NEAR(exact_mse(codebook(4)), 0.009501008008, 1e-11);
}

TEST(TurboCodebook, StationaryUnderOneMoreLloydStep) {
  for (int bits : kBits) {
    const std::vector<double> c = codebook(bits), next = lloyd_step(c);
    for (int i = 0; i < (1 << bits); ++i) EXPECT_NEAR(next[i], c[i], 1e-12) << bits << " bits, level " << i;
  }
}

// Tolerance: the sampled MSE of 1e6 N(0,1) draws has a relative standard deviation of about 0.15%
// (sqrt(Var[e^2] / N) / MSE); 1% is more than 6 sigma.
TEST(TurboCodebook, SampledMseMatchesOptimum) {
  std::mt19937 rng(7);
  std::normal_distribution<double> normal;
  std::vector<double> xs(1000000);
  for (double& x : xs) x = normal(rng);
  for (int bits : kBits) {
    const float* c = gaussian_codebook(bits);
    double sum = 0;
    for (double x : xs) {
      double best = INFINITY;
      for (int i = 0; i < (1 << bits); ++i) best = std::min(best, (x - c[i]) * (x - c[i]));
      sum += best;
    }
    const double mse = sum / double(xs.size()), exact = exact_mse(codebook(bits));
    std::printf("turbo%d sampled MSE over 1e6 N(0,1): %.6f (optimum %.6f)\n", bits, mse, exact);
    EXPECT_NEAR(mse, exact, 0.01 * exact);
  }
}

TEST(TurboCodebook, LevelsAreScaledForTheGroup) {
  for (int bits : kBits)
    for (int group : {32, 64, 128})
      for (int i = 0; i < (1 << bits); ++i) {
        // The nearest fp16 value of the scaled level: exact in f16, within 2^-11 relative of the float.
        const float x = float(codebook(bits)[i] / std::sqrt(double(group))), lv = levels(bits, group)[i];
        EXPECT_EQ(lv, fp16_to_f32(f32_to_fp16(x)));
        EXPECT_LE(std::fabs(lv - x), std::ldexp(std::fabs(x), -11));
      }
  EXPECT_THROW(levels(3, 96), Error);
  EXPECT_THROW(levels(5, 128), Error);
  EXPECT_THROW(gaussian_codebook(1), Error);
}

// ---- Rotation ----

double norm(const float* x, int n) {
  double s = 0;
  for (int i = 0; i < n; ++i) s += double(x[i]) * x[i];
  return std::sqrt(s);
}

TEST(TurboRotation, IsOrthogonalAndInvertible) {
  for (int d : kHeadDims) {
    const std::vector<float> x = test::random_floats(d, 100 + d);
    std::vector<float> y = x;
    rotate(y.data(), d);
    const int n = group_size(d);
    for (int g = 0; g < d; g += n)  // norms preserved per group
      EXPECT_NEAR(norm(y.data() + g, n), norm(x.data() + g, n), 1e-6 * norm(x.data() + g, n)) << d;
    unrotate(y.data(), d);
    for (int i = 0; i < d; ++i) EXPECT_NEAR(y[i], x[i], 1e-6) << "head_dim " << d << " i " << i;
  }
}

// rotate() must equal the dense product H·S with H_ij = (-1)^popcount(i & j) / sqrt(n) and S the
// documented splitmix64 signs.
TEST(TurboRotation, MatchesDenseHadamardTimesDocumentedSigns) {
  for (int n : {32, 64, 128}) {
    std::vector<float> signs(n);
    uint64_t state = kSignSeed ^ uint64_t(n), w = 0;
    for (int i = 0; i < n; ++i) {
      if (i % 64 == 0) {
        uint64_t z = (state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        w = z ^ (z >> 31);
      }
      signs[i] = ((w >> (i % 64)) & 1) ? -1.0f : 1.0f;
    }
    int negatives = 0;
    for (float s : signs) negatives += s < 0;
    EXPECT_GT(negatives, n / 4);
    EXPECT_LT(negatives, 3 * n / 4);

    const std::vector<float> x = test::random_floats(n, 5);
    std::vector<float> y = x;
    rotate(y.data(), n);
    for (int i = 0; i < n; ++i) {
      double s = 0;
      for (int j = 0; j < n; ++j) s += ((__builtin_popcount(i & j) & 1) ? -1.0 : 1.0) * signs[j] * x[j];
      EXPECT_NEAR(y[i], s / std::sqrt(double(n)), 1e-5) << n << " " << i;
    }
  }
}

double kurtosis(const std::vector<double>& v) {
  double m2 = 0, m4 = 0;
  for (double x : v) m2 += x * x, m4 += x * x * x * x;
  m2 /= double(v.size()), m4 /= double(v.size());
  return m4 / (m2 * m2);
}

// Keys with loud channels: x_j = sigma_j * g_j, g ~ N(0, I), channel 3 at 100x and channels 17, 40 at
// 10x. Pooled over vectors, every rotated coordinate is exactly N(0, ||sigma||^2 / n) (a signed sum
// of independent Gaussians), so the rotated kurtosis is 3 and the per-coordinate variances are equal,
// while the unrotated coordinates have kurtosis of order n. Per vector, the rotated unit vector has
// no outliers: max_i |u_i| * sqrt(n) stays small (for one dominant channel u is nearly flat,
// +-1/sqrt(n), i.e. per-vector kurtosis near 1: lighter-tailed than N(0, 1/n), not heavier).
TEST(TurboRotation, SpreadsOutlierChannels) {
  for (int n : {32, 64, 128}) {
    std::vector<double> sigma(n, 1.0);
    sigma[3] = 100, sigma[17 % n] = 10, sigma[40 % n] = 10;
    double var_expected = 0;
    for (double s : sigma) var_expected += s * s / n;
    std::mt19937 rng(11);
    std::normal_distribution<float> normal;
    const int n_vec = 20000;
    std::vector<double> before, after, var(n, 0.0);
    double worst_peak = 0;
    std::vector<float> x(n);
    for (int v = 0; v < n_vec; ++v) {
      for (int j = 0; j < n; ++j) x[j] = float(sigma[j]) * normal(rng);
      for (float f : x) before.push_back(f);
      const double r = norm(x.data(), n);
      rotate(x.data(), n);
      for (int i = 0; i < n; ++i) {
        after.push_back(x[i]);
        var[i] += double(x[i]) * x[i] / n_vec;
        worst_peak = std::max(worst_peak, std::abs(x[i]) / r * std::sqrt(double(n)));
      }
    }
    const auto [vmin, vmax] = std::minmax_element(var.begin(), var.end());
    std::printf("n=%d: kurtosis before %.1f, after %.3f; coordinate variance %.2f..%.2f (expected %.2f); "
                "max |u_i|*sqrt(n) %.2f\n", n, kurtosis(before), kurtosis(after), *vmin, *vmax,
                var_expected, worst_peak);
    EXPECT_GT(kurtosis(before), 10.0);
    EXPECT_NEAR(kurtosis(after), 3.0, 0.15);
    EXPECT_NEAR(*vmin, var_expected, 0.05 * var_expected);
    EXPECT_NEAR(*vmax, var_expected, 0.05 * var_expected);
    EXPECT_LT(worst_peak, 6.0);
  }
}

// ---- Layout ----

TEST(TurboLayout, GroupSizesAndHeadBytes) {
  EXPECT_EQ(group_size(32), 32);
  EXPECT_EQ(group_size(64), 64);
  EXPECT_EQ(group_size(128), 128);
  EXPECT_EQ(group_size(256), 128);
  EXPECT_EQ(group_size(512), 128);
  EXPECT_EQ(head_bytes(2, 128), 34u);
  EXPECT_EQ(head_bytes(3, 128), 50u);
  EXPECT_EQ(head_bytes(4, 128), 66u);
  EXPECT_EQ(head_bytes(3, 256), 100u);
  EXPECT_EQ(head_bytes(3, 512), 200u);
  EXPECT_EQ(head_bytes(3, 64), 26u);
  EXPECT_EQ(head_bytes(2, 32), 10u);
  EXPECT_EQ(head_bytes(4, 32), 18u);
  for (int d : {0, -128, 16, 48, 80, 96, 100, 192}) EXPECT_THROW(group_size(d), Error) << d;
  EXPECT_THROW(head_bytes(1, 128), Error);
  EXPECT_THROW(head_bytes(8, 128), Error);
}

// The documented LSB-first bit stream, checked byte by byte on fixed index patterns.
TEST(TurboLayout, IndexPackingIsTheDocumentedBitStream) {
  uint8_t b[3] = {0, 0, 0};
  for (int j = 0; j < 8; ++j) detail::write_index(b, 3, j, j);  // word = sum_j j << 3j
  const uint32_t word = b[0] | (b[1] << 8) | (b[2] << 16);
  uint32_t expected = 0;
  for (int j = 0; j < 8; ++j) expected |= uint32_t(j) << (3 * j);
  EXPECT_EQ(word, expected);
  uint8_t b2[1] = {0};
  for (int j = 0; j < 4; ++j) detail::write_index(b2, 2, j, 3 - j);
  EXPECT_EQ(b2[0], 0x1B);  // 3 | 2<<2 | 1<<4 | 0<<6
  uint8_t b4[1] = {0};
  detail::write_index(b4, 4, 0, 0xA);
  detail::write_index(b4, 4, 1, 0x5);
  EXPECT_EQ(b4[0], 0x5A);

  // quantize_head writes [fp16 r'][indices] per group; indices decode to the nearest levels.
  for (int bits : kBits) {
    const std::vector<float> x = test::random_floats(256, 3);
    std::vector<uint8_t> code(head_bytes(bits, 256));
    quantize_head(bits, x.data(), code.data(), 256);
    std::vector<float> y = x;
    rotate(y.data(), 256);
    for (int g = 0; g < 2; ++g) {
      const uint8_t* rec = code.data() + g * head_bytes(bits, 128);
      const float r = float(norm(x.data() + 128 * g, 128));
      for (int i = 0; i < 128; ++i) {
        const float u = y[128 * g + i] / r;
        const int idx = detail::read_index(rec + 2, bits, i);
        const float* lv = levels(bits, 128);
        for (int k = 0; k < (1 << bits); ++k)
          EXPECT_LE(std::abs(u - lv[idx]), std::abs(u - lv[k]) + 1e-6f) << bits << " g" << g << " i" << i;
      }
    }
  }
}

// ---- Round trip ----

// Norm correction: with unit u and codeword c, the error is ||u - c/||c||||^2 = 2 - 2<u,c>/||c||.
// If the rotated coordinates were exactly N(0, 1/n), E<u,c> = E||c||^2 = 1 - D (centroid condition)
// would give about 2 - 2 sqrt(1 - D) = D + D^2/4 + ... (0.1212 / 0.03485 / 0.009524 for turbo2/3/4),
// slightly above the plain codebook MSE D. The rotated coordinates of a unit vector are in fact a bit
// lighter-tailed than N(0, 1/n) (kurtosis 3 - 6/(n+2)), which lowers the error, more so for small n.
// Measured (2000 Gaussian vectors per case): n = 128 gives 0.96-1.01 D, n = 64 0.93-1.0 D, n = 32
// 0.88-0.95 D. Bound checked: 0.93 D <= MSE <= 2 - 2 sqrt(1 - D) for n = 128, 0.85 D <= MSE for 32, 64.
double norm_corrected_mse(int bits) { return 2 - 2 * std::sqrt(1 - exact_mse(codebook(bits))); }

// lane_tree_sum's order, written another way: lane l's partial, then T(l, h) = T(l, 2h) + T(l + h, 2h)
// with T(l, 32) = p_l, the sum T(0, 1). Values of mixed magnitude make the order visible: the tree
// must differ from the plain left-to-right sum on some inputs (else this test could not fail).
static double tree_of(const double* p, int l, int h) {
  return h == 32 ? p[l] : tree_of(p, l, 2 * h) + tree_of(p, l + h, 2 * h);
}

TEST(TurboSums, LaneTreeSumIsTheDocumentedOrder) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> mag(-20, 20);
  std::normal_distribution<double> nd;
  int differs_from_chain = 0;
  for (int n : {32, 64, 128})
    for (auto order : {detail::LaneOrder::Strided, detail::LaneOrder::Blocked})
      for (int trial = 0; trial < 200; ++trial) {
        std::vector<double> v(static_cast<size_t>(n));
        for (double& x : v) x = nd(rng) * std::exp2(std::round(mag(rng)));
        const int m = n / 32;
        double p[32];
        for (int l = 0; l < 32; ++l) {
          p[l] = 0;
          for (int k = 0; k < m; ++k) {
            const double x = order == detail::LaneOrder::Strided ? v[size_t(l + 32 * k)] : v[size_t(l * m + k)];
            p[l] = k == 0 ? x : p[l] + x;
          }
        }
        const double got = detail::lane_tree_sum(v.data(), n, order);
        ASSERT_EQ(got, tree_of(p, 0, 1)) << "n " << n << " trial " << trial;
        double chain = 0;
        for (double x : v) chain += x;
        differs_from_chain += got != chain;
      }
  EXPECT_GT(differs_from_chain, 100);
}

TEST(TurboRoundTrip, KeepsNormAndHasCodebookMse) {
  for (int bits : kBits)
    for (int d : kHeadDims) {
      const int n_vec = 2000;
      const std::vector<float> all = test::random_floats(size_t(n_vec) * d, 1000 + d + bits, 3.0f);
      std::vector<uint8_t> code(head_bytes(bits, d));
      std::vector<float> back(d);
      double rel_mse = 0;
      const int n = group_size(d);
      for (int v = 0; v < n_vec; ++v) {
        const float* x = all.data() + size_t(v) * d;
        quantize_head(bits, x, code.data(), d);
        dequantize_head(bits, code.data(), back.data(), d);
        for (int g = 0; g < d; g += n) {
          const double r = norm(x + g, n);
          // fp16 r' has relative rounding error <= 2^-11; the float rotation adds ~1e-6.
          ASSERT_NEAR(norm(back.data() + g, n), r, r * (std::ldexp(1.0, -11) + 1e-5)) << bits << " " << d;
          double e = 0;
          for (int i = 0; i < n; ++i) e += (double(back[g + i]) - x[g + i]) * (double(back[g + i]) - x[g + i]);
          rel_mse += e / (r * r);
        }
      }
      rel_mse /= double(n_vec) * (d / n);
      const double expect = norm_corrected_mse(bits);
      std::printf("turbo%d head_dim %3d: relative MSE %.6f (codebook %.6f, norm-corrected %.6f)\n", bits, d,
                  rel_mse, exact_mse(codebook(bits)), expect);
      EXPECT_LE(rel_mse, expect) << bits << " " << d;
      EXPECT_GE(rel_mse, (n == 128 ? 0.93 : 0.85) * exact_mse(codebook(bits))) << bits << " " << d;
    }
}

// Keys with a loud channel: after rotation the unit vector is nearly flat, and the relative error
// stays at or below the Gaussian-vector level (the error lives in the small remainder).
TEST(TurboRoundTrip, OutlierChannelVectors) {
  for (int bits : kBits) {
    std::vector<float> x = test::random_floats(128, 77);
    x[5] *= 100, x[90] *= 30;
    std::vector<uint8_t> code(head_bytes(bits, 128));
    std::vector<float> back(128);
    quantize_head(bits, x.data(), code.data(), 128);
    dequantize_head(bits, code.data(), back.data(), 128);
    double e = 0;
    for (int i = 0; i < 128; ++i) e += (double(back[i]) - x[i]) * (double(back[i]) - x[i]);
    const double rel = e / (norm(x.data(), 128) * norm(x.data(), 128));
    std::printf("turbo%d outlier vector: relative MSE %.6f\n", bits, rel);
    EXPECT_LT(rel, 1.2 * norm_corrected_mse(bits));
  }
}

TEST(TurboRoundTrip, ZeroVectorsAndZeroGroups) {
  for (int bits : kBits)
    for (int d : kHeadDims) {
      std::vector<float> x(d, 0.0f), back(d, 1.0f);
      std::vector<uint8_t> code(head_bytes(bits, d), 0xFF);
      if (d >= 256) x[200] = 1.5f;  // group 1 non-zero, group 0 all zero
      quantize_head(bits, x.data(), code.data(), d);
      const float r0 = detail::read_norm(code.data());
      EXPECT_EQ(r0, 0.0f);
      dequantize_head(bits, code.data(), back.data(), d);
      for (int i = 0; i < std::min(d, 128); ++i) EXPECT_EQ(back[i], 0.0f) << bits << " " << d;
      std::vector<float> q = test::random_floats(d, 9), acc(d, 0.0f);
      rotate(q.data(), d);
      if (d < 256) {
        EXPECT_EQ(dot_rotated(bits, code.data(), q.data(), d), 0.0f);
        axpy_rotated(bits, 2.0f, code.data(), acc.data(), d);
        for (float a : acc) EXPECT_EQ(a, 0.0f);
      } else {
        EXPECT_NEAR(back[200], 1.5f, 1.5f * 1e-3f);  // a 1-hot group: rotation makes it flat
      }
    }
}

// ---- Rotated-basis kernels ----

// Reference: dot(dequantize_head(src), q) in double. Tolerance 1e-5 relative to ||v||·||q|| (the
// scale of the dot product; the dot itself can be near 0).
void check_kernels(const detail::Kernels& k, const char* name) {
  for (int bits : kBits)
    for (int d : kHeadDims)
      for (int trial = 0; trial < 20; ++trial) {
        const std::vector<float> x = test::random_floats(d, 500 + trial * 7 + d, 2.0f);
        const std::vector<float> q = test::random_floats(d, 900 + trial * 3 + d);
        std::vector<uint8_t> code(head_bytes(bits, d) + 64, 0xEE);  // canary after the head
        quantize_head(bits, x.data(), code.data(), d);
        std::vector<float> v(d), q_rot = q;
        dequantize_head(bits, code.data(), v.data(), d);
        rotate(q_rot.data(), d);
        double ref = 0;
        for (int i = 0; i < d; ++i) ref += double(v[i]) * q[i];
        const double scale = norm(v.data(), d) * norm(q.data(), d);
        EXPECT_NEAR(k.dot(bits, code.data(), q_rot.data(), d), ref, 1e-5 * scale)
            << name << " turbo" << bits << " head_dim " << d;

        // axpy in the rotated basis, then unrotate == acc + a * v (original basis).
        const float a = 0.37f + 0.1f * trial;
        const std::vector<float> acc0 = test::random_floats(d, 42 + trial);
        std::vector<float> acc_rot = acc0;
        rotate(acc_rot.data(), d);
        k.axpy(bits, a, code.data(), acc_rot.data(), d);
        unrotate(acc_rot.data(), d);
        for (int i = 0; i < d; ++i)
          EXPECT_NEAR(acc_rot[i], acc0[i] + a * v[i], 1e-5 * (1 + std::abs(acc0[i]) + std::abs(a * v[i])))
              << name << " turbo" << bits << " head_dim " << d << " i " << i;
      }
}

TEST(TurboRotated, ScalarMatchesDequantized) { check_kernels(detail::kernels_scalar(), "scalar"); }

TEST(TurboRotated, Avx2MatchesDequantized) {
  const detail::Kernels* k = detail::kernels_avx2();
  if (!k) GTEST_SKIP() << "no AVX2 on this CPU";
  check_kernels(*k, "avx2");
}

// AVX2 and scalar kernels agree closely on random bytes (every index pattern, random norms).
TEST(TurboRotated, Avx2MatchesScalarOnRandomBytes) {
  const detail::Kernels* k = detail::kernels_avx2();
  if (!k) GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(3);
  for (int bits : kBits)
    for (int d : kHeadDims) {
      const size_t bytes = head_bytes(bits, d);
      const int n = group_size(d);
      for (int trial = 0; trial < 50; ++trial) {
        std::vector<uint8_t> code(bytes);
        for (auto& b : code) b = uint8_t(rng());
        for (size_t g = 0; g < bytes; g += bytes / (d / n)) {
          const uint16_t h = f32_to_fp16(0.5f + float(rng() % 1000) / 100.0f);
          std::memcpy(&code[g], &h, 2);
        }
        const std::vector<float> q = test::random_floats(d, trial);
        double mag = 0;
        for (int i = 0; i < d; ++i) mag += std::abs(q[i]);
        const float s = detail::kernels_scalar().dot(bits, code.data(), q.data(), d);
        EXPECT_NEAR(k->dot(bits, code.data(), q.data(), d), s, 1e-5 * mag * 11);
        std::vector<float> a1(d, 1.0f), a2(d, 1.0f);
        detail::kernels_scalar().axpy(bits, -0.75f, code.data(), a1.data(), d);
        k->axpy(bits, -0.75f, code.data(), a2.data(), d);
        for (int i = 0; i < d; ++i) EXPECT_NEAR(a2[i], a1[i], 1e-5f * (1 + std::abs(a1[i])));
        // decode == axpy with a = 1 into zeros, bit for bit, on both kernels.
        std::vector<float> z(d, 0.0f), y1(d), y2(d);
        detail::kernels_scalar().axpy(bits, 1.0f, code.data(), z.data(), d);
        detail::kernels_scalar().decode(bits, code.data(), y1.data(), d);
        k->decode(bits, code.data(), y2.data(), d);
        EXPECT_EQ(0, std::memcmp(z.data(), y1.data(), sizeof(float) * d)) << bits << " " << d;
        EXPECT_EQ(0, std::memcmp(z.data(), y2.data(), sizeof(float) * d)) << bits << " " << d;
      }
    }
}

TEST(TurboRotated, DispatchUsesActiveIsaKernels) {
  const bool avx2 = isa_has_avx2(active_isa()) && detail::kernels_avx2();
  EXPECT_EQ(&detail::kernels(), avx2 ? detail::kernels_avx2() : &detail::kernels_scalar());
  IsaScope scalar(Isa::Scalar);
  EXPECT_EQ(&detail::kernels(), &detail::kernels_scalar());
}

// ---- Timing report (no assertion on speed; numbers are printed for the log) ----

double ns_per_call(const detail::Kernels& k, int bits, bool dot, int d) {
  const int n_rows = 4096;  // 4096 cached tokens, like one head of a decode step
  const size_t bytes = head_bytes(bits, d);
  std::vector<uint8_t> code(bytes * n_rows);
  const std::vector<float> x = test::random_floats(size_t(d) * n_rows, 1);
  for (int r = 0; r < n_rows; ++r) quantize_head(bits, x.data() + size_t(r) * d, code.data() + r * bytes, d);
  std::vector<float> q = test::random_floats(d, 2), acc(d, 0.0f);
  volatile float sink = 0;
  double best = 1e30;
  for (int rep = 0; rep < 7; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    float s = 0;
    for (int r = 0; r < n_rows; ++r) {
      if (dot) s += k.dot(bits, code.data() + r * bytes, q.data(), d);
      else k.axpy(bits, 1e-3f, code.data() + r * bytes, acc.data(), d);
    }
    const auto t1 = std::chrono::steady_clock::now();
    sink = sink + s + acc[0];
    best = std::min(best, std::chrono::duration<double, std::nano>(t1 - t0).count() / n_rows);
  }
  return best;
}

TEST(TurboSpeed, ReportNsPerCall) {
  const detail::Kernels* avx2 = detail::kernels_avx2();
  for (int bits : kBits)
    for (int d : {128, 256}) {
      std::printf("turbo%d head_dim %d: dot scalar %.1f ns", bits, d, ns_per_call(detail::kernels_scalar(), bits, true, d));
      if (avx2) std::printf(", avx2 %.1f ns", ns_per_call(*avx2, bits, true, d));
      std::printf("; axpy scalar %.1f ns", ns_per_call(detail::kernels_scalar(), bits, false, d));
      if (avx2) std::printf(", avx2 %.1f ns", ns_per_call(*avx2, bits, false, d));
      std::printf("\n");
    }
}

}  // namespace
}  // namespace polykv::turbo
