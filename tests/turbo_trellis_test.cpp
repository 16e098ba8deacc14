// Tests of the trellis-coded turbo types (quant/turbo_trellis.h): layout, the Viterbi encoder against
// an independent dynamic program and against plain turbo, norm correction, the SIMD decoders against
// the scalar one, and the KV types built on them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/cpu_features.h"
#include "core/error.h"
#include "core/fp16.h"
#include "kv/kv_type.h"
#include "quant/turbo.h"
#include "quant/turbo_trellis.h"
#include "test_util.h"

namespace polykv::turbo::trellis {
namespace {

const int kHeadDims[] = {32, 64, 128, 256, 512};
const int kBits[] = {2, 3, 4};

double norm(const float* x, int n) {
  double s = 0;
  for (int i = 0; i < n; ++i) s += double(x[i]) * x[i];
  return std::sqrt(s);
}

std::vector<float> gaussian(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  std::vector<float> x(n);
  for (float& v : x) v = nd(rng);
  return x;
}

TEST(TrellisLayout, SameSizeAsPlainTurbo) {
  for (int b : kBits)
    for (int d : kHeadDims) EXPECT_EQ(head_bytes(b, d), turbo::head_bytes(b, d)) << b << " " << d;
  EXPECT_EQ(head_bytes(3, 128), 50u);
  EXPECT_EQ(kv_head_bytes(KvType::Turbo3T, 128), 50u);
  EXPECT_EQ(kv_head_bytes(KvType::Turbo4T, 128), 66u);
  EXPECT_EQ(kv_head_bytes(KvType::Turbo2T, 128), 34u);
  EXPECT_EQ(parse_kv_type("turbo3t"), KvType::Turbo3T);
  EXPECT_EQ(parse_kv_type("TURBO2T"), KvType::Turbo2T);
  for (KvType t : {KvType::Turbo2T, KvType::Turbo3T, KvType::Turbo4T}) EXPECT_TRUE(kv_type_rotated(t));
  EXPECT_THROW(head_bytes(3, 96), Error);
  EXPECT_THROW(head_bytes(5, 128), Error);
}

// The group levels are the scaled codebook rounded to fp16 (exact in f16 for the tensor-core decode kernel),
// still ascending and symmetric.
TEST(TrellisCodebook, GroupLevelsAreFp16Exact) {
  for (int b : kBits)
    for (int n : {32, 64, 128}) {
      const int L = 2 << b;
      for (int k = 0; k < L; ++k) {
        const float x = float(codebook(b)[k] / std::sqrt(double(n))), lv = levels(b, n)[k];
        EXPECT_EQ(lv, fp16_to_f32(f32_to_fp16(x))) << b << " " << n << " " << k;
        EXPECT_LE(std::fabs(lv - x), std::ldexp(std::fabs(x), -11));
        EXPECT_EQ(lv, -levels(b, n)[L - 1 - k]);
        if (k) EXPECT_LT(levels(b, n)[k - 1], lv);
      }
    }
}

TEST(TrellisCodebook, SymmetricAscendingAndSubsetsInterleaved) {
  for (int b : kBits) {
    const int L = 2 << b;
    for (int k = 0; k < L; ++k) {
      EXPECT_DOUBLE_EQ(codebook(b)[k], -codebook(b)[L - 1 - k]) << b;
      if (k) EXPECT_LT(codebook(b)[k - 1], codebook(b)[k]) << b;
    }
  }
  // From every state the two branches (t_i = 0, 1) reach subsets of the same parity (Ungerboeck's
  // rule: a state's branches use D0/D2 or D1/D3), and all four subsets occur.
  int seen = 0;
  for (int w = 0; w < 8; ++w) {
    EXPECT_EQ(subset_of_window(w) & 1, subset_of_window(w | 8) & 1) << w;
    seen |= 1 << subset_of_window(w) | 1 << subset_of_window(w | 8);
  }
  EXPECT_EQ(seen, 15);
}

// The path cost of the stored code, recomputed by walking the decoder's windows.
double path_error(int bits, const uint8_t* rec, const float* u, int n) {
  const float* lv = levels(bits, n);
  const uint8_t* t = rec + 2;
  const uint8_t* j = t + n / 8;
  const int w_bits = bits - 1;
  double e = 0;
  int w = 0;
  for (int i = 0; i < n; ++i) {
    w = (w >> 1) | (((t[i / 8] >> (i % 8)) & 1) << 3);
    int idx = 0;  // index i of the w_bits-bit LSB-first stream, bit by bit
    for (int b = 0; b < w_bits; ++b) idx |= ((j[(w_bits * i + b) / 8] >> ((w_bits * i + b) % 8)) & 1) << b;
    const double d = u[i] - lv[subset_of_window(w) + 4 * idx];
    e += d * d;
  }
  return e;
}

// Minimum over all 2^n trellis paths (and all indices) by an independent dynamic program over the
// full 4-bit window, in double precision.
double best_path_error(int bits, const float* u, int n) {
  const float* lv = levels(bits, n);
  const int L = 2 << bits;
  std::vector<double> cost(16, std::numeric_limits<double>::infinity());  // by window w (t_{i-3}..t_i)
  for (int t0 = 0; t0 < 2; ++t0) {
    const int w = t0 << 3;
    double best = std::numeric_limits<double>::infinity();
    for (int k = subset_of_window(w); k < L; k += 4) best = std::min(best, (u[0] - double(lv[k])) * (u[0] - double(lv[k])));
    cost[size_t(w)] = best;
  }
  for (int i = 1; i < n; ++i) {
    std::vector<double> next(16, std::numeric_limits<double>::infinity());
    for (int w = 0; w < 16; ++w) {
      if (std::isinf(cost[size_t(w)])) continue;
      for (int t = 0; t < 2; ++t) {
        const int nw = (w >> 1) | (t << 3);
        double best = std::numeric_limits<double>::infinity();
        for (int k = subset_of_window(nw); k < L; k += 4)
          best = std::min(best, (u[i] - double(lv[k])) * (u[i] - double(lv[k])));
        next[size_t(nw)] = std::min(next[size_t(nw)], cost[size_t(w)] + best);
      }
    }
    cost = next;
  }
  double best = std::numeric_limits<double>::infinity();
  for (double c : cost) best = std::min(best, c);
  return best;
}

TEST(TrellisEncoder, FindsTheMinimumErrorPath) {
  for (int b : kBits)
    for (int n : {32, 64, 128})
      for (int v = 0; v < 30; ++v) {
        std::vector<float> x = gaussian(size_t(n), uint32_t(100 * n + v + 7 * b));
        std::vector<uint8_t> rec(head_bytes(b, n));
        quantize_head(b, x.data(), rec.data(), n);
        // The encoder sees u = rotate(x) / ||x||; rebuild it the same way.
        std::vector<float> u = x;
        rotate(u.data(), n);
        const float inv_r = float(1.0 / norm(x.data(), n));
        for (float& c : u) c *= inv_r;
        const double got = path_error(b, rec.data(), u.data(), n), best = best_path_error(b, u.data(), n);
        ASSERT_NEAR(got, best, 1e-5 * (1 + best)) << "bits " << b << " n " << n << " vector " << v;
      }
}

// Relative MSE of a round trip, averaged over Gaussian vectors, for turbo<b>t and turbo<b> on the
// same data. tools/tcq_codebook.py (held out, n = 128): 0.0859 / 0.0235 / 0.0062 against
// 0.116 / 0.034 / 0.0094, ratios 0.74 / 0.69 / 0.66.
TEST(TrellisRoundTrip, KeepsNormAndBeatsPlainTurboByAQuarter) {
  const double bound[5] = {0, 0, 0.09, 0.025, 0.0066};
  for (int b : kBits)
    for (int d : kHeadDims) {
      const int n_vec = 500, n = group_size(d);
      const std::vector<float> all = gaussian(size_t(n_vec) * d, uint32_t(7 + d + b));
      std::vector<uint8_t> code(head_bytes(b, d)), code_plain(turbo::head_bytes(b, d));
      std::vector<float> back(static_cast<size_t>(d)), back_plain(static_cast<size_t>(d));
      double mse = 0, mse_plain = 0;
      for (int v = 0; v < n_vec; ++v) {
        const float* x = all.data() + size_t(v) * d;
        quantize_head(b, x, code.data(), d);
        dequantize_head(b, code.data(), back.data(), d);
        turbo::quantize_head(b, x, code_plain.data(), d);
        turbo::dequantize_head(b, code_plain.data(), back_plain.data(), d);
        for (int g = 0; g < d; g += n) {
          const double r = norm(x + g, n);
          ASSERT_NEAR(norm(back.data() + g, n), r, r * (std::ldexp(1.0, -11) + 1e-5)) << d;
          double e = 0, e_plain = 0;
          for (int i = 0; i < n; ++i) {
            const double a = double(back[size_t(g + i)]) - x[g + i], p = double(back_plain[size_t(g + i)]) - x[g + i];
            e += a * a, e_plain += p * p;
          }
          mse += e / (r * r), mse_plain += e_plain / (r * r);
        }
      }
      mse /= double(n_vec) * (d / n), mse_plain /= double(n_vec) * (d / n);
      std::printf("turbo%dt head_dim %3d: relative MSE %.5f, turbo%d %.5f (ratio %.3f)\n", b, d, mse, b, mse_plain,
                  mse / mse_plain);
      EXPECT_LT(mse, bound[b]) << b << " " << d;
      EXPECT_LT(mse / mse_plain, 0.78) << b << " " << d;
    }
}

TEST(TrellisRoundTrip, ZeroGroupsDecodeToZero) {
  std::vector<float> x(256, 0.0f);
  for (int i = 128; i < 256; ++i) x[size_t(i)] = float(i % 7) - 3.0f;
  std::vector<uint8_t> code(head_bytes(3, 256));
  std::vector<float> back(256, 1.0f);
  quantize_head(3, x.data(), code.data(), 256);
  dequantize_head(3, code.data(), back.data(), 256);
  for (int i = 0; i < 128; ++i) EXPECT_EQ(back[size_t(i)], 0.0f);
  EXPECT_NEAR(norm(back.data() + 128, 128), norm(x.data() + 128, 128), 1e-3 * norm(x.data() + 128, 128));
}

TEST(TrellisDecode, FastMatchesScalarOnRandomBytes) {
  std::mt19937 rng(5);
  for (int b : kBits)
    for (int d : kHeadDims)
      for (int rep = 0; rep < 20; ++rep) {
        std::vector<uint8_t> code(head_bytes(b, d));
        for (auto& byte : code) byte = uint8_t(rng());
        const int n = group_size(d);
        for (int g = 0; g < d / n; ++g) {  // finite norms: fp16 in [-4, 4]
          const uint16_t h = f32_to_fp16(float(int(rng() % 800) - 400) / 100.0f);
          std::memcpy(code.data() + size_t(g) * head_bytes(b, n), &h, 2);
        }
        std::vector<float> ref(static_cast<size_t>(d)), got(static_cast<size_t>(d));
        decode_rotated(b, code.data(), ref.data(), d);
        decode_rotated_fast(b, code.data(), got.data(), d);
        ASSERT_EQ(0, std::memcmp(ref.data(), got.data(), sizeof(float) * size_t(d))) << b << " " << d;
#if defined(__aarch64__)
        const DecodeFn neon = decode_rotated_neon_kernel();
#else
        const DecodeFn neon = nullptr;
#endif
        for (DecodeFn k : {decode_rotated_avx2_kernel(), decode_rotated_avx512_kernel(), neon}) {
          if (!k) continue;
          std::fill(got.begin(), got.end(), -1.0f);
          k(b, code.data(), got.data(), d);
          ASSERT_EQ(0, std::memcmp(ref.data(), got.data(), sizeof(float) * size_t(d))) << b << " " << d;
        }
      }
#if !defined(__aarch64__)
  if (!cpu_features().has_avx2_set()) GTEST_SKIP() << "no AVX2: the fast decoder is the scalar one";
#endif
}

// Rows that stress the encoder's ties, NaN / infinity handling and scaling: the AVX2 encoder (8 states per vector)
// must give the reference's bytes for every one of them.
std::vector<float> awkward_row(int kind, int d, uint32_t seed) {
  std::vector<float> x = gaussian(size_t(d), seed);
  std::mt19937 rng(seed);
  switch (kind) {
    case 0: break;                                             // Gaussian
    case 1: for (float& v : x) v *= 1e30f; break;              // r² near double's comfort, u in range
    case 2: for (float& v : x) v *= 1e-41f; break;             // subnormal inputs
    case 3: for (float& v : x) v = 1.0f; break;                // a constant: many equal coordinates after rotation
    case 4: for (float& v : x) v = float(int(rng() % 5) - 2); break;  // small integers: exact ties between paths
    case 5: for (int i = 0; i < d / 2; ++i) x[size_t(i)] = 0.0f; break;  // a zero first group (d >= 64: 2 groups)
    case 6: x[size_t(rng() % unsigned(d))] = std::numeric_limits<float>::quiet_NaN(); break;
    case 7: x[size_t(rng() % unsigned(d))] = std::numeric_limits<float>::infinity(); break;
    case 8: for (int i = 0; i < d; ++i) x[size_t(i)] = i == 3 ? 1.0f : 0.0f; break;  // one spike: a flat rotation
    default: for (float& v : x) v = -0.0f; break;              // negative zeros: the all-zero record
  }
  return x;
}

TEST(TrellisEncode, Avx2MatchesTheReferenceByteForByte) {
  const QuantizeFn avx2 = quantize_head_avx2_kernel();
  if (!avx2) GTEST_SKIP() << "no AVX2 encoder on this CPU / architecture";
  int rows = 0;
  for (int b : kBits)
    for (int d : kHeadDims)
      for (int kind = 0; kind < 10; ++kind)
        for (int rep = 0; rep < (kind == 0 ? 40 : 3); ++rep) {
          const std::vector<float> x = awkward_row(kind, d, uint32_t(1000 * kind + 10 * d + rep + b));
          std::vector<uint8_t> ref(head_bytes(b, d), 0xAB), got(head_bytes(b, d), 0xCD);
          quantize_head(b, x.data(), ref.data(), d);
          avx2(b, x.data(), got.data(), d);
          ASSERT_EQ(ref, got) << "bits " << b << " head_dim " << d << " kind " << kind << " rep " << rep;
          std::fill(got.begin(), got.end(), uint8_t(0xCD));
          quantize_head_fast(b, x.data(), got.data(), d);
          ASSERT_EQ(ref, got) << "quantize_head_fast: bits " << b << " head_dim " << d << " kind " << kind;
          ++rows;
        }
  EXPECT_EQ(rows, 3 * 5 * (40 + 9 * 3));
  // The dispatcher keeps the reference's errors.
  std::vector<float> x(128, 1.0f);
  std::vector<uint8_t> out(100);
  EXPECT_THROW(quantize_head_fast(5, x.data(), out.data(), 128), Error);
  EXPECT_THROW(quantize_head_fast(3, x.data(), out.data(), 96), Error);
}

}  // namespace
}  // namespace polykv::turbo::trellis
