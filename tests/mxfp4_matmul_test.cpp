// MXFP4 matmul kernels (backend/cpu/mxfp4_kernels*.cpp) against matmul_ref on every ISA this CPU has
// (forced in turn), with and without the x16 packed copy (packed_weights.h; AVX-512 and the scalar
// reference and, since 2026-12-01c, AVX2 read it; tests/mxfp4_packed_avx2_test.cpp), for 1..9 tokens and awkward shapes (one block, one row, rows not a multiple of
// 16, n_in an odd number of blocks), weights quantized from floats and random bytes (every code, a
// spread of exponents); batch invariance (a token's outputs are bit-identical alone or with others,
// any thread count); and the SIMD kernels agree with the scalar one to float rounding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "backend/cpu/matmul.h"
#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/packed_weights.h"
#include "quant/mxfp4.h"
#include "quant/quant.h"
#include "test_util.h"

namespace polykv {
namespace {

using cpu::Isa;

struct Matrix {
  std::vector<uint8_t> bytes;
  WeightMatrix m;
};

// n_out rows, 5 bytes of padding each (odd strides: nothing may assume alignment); quantized from
// random floats, or random bytes with e in 118..126 (values up to 12 * 2^-2).
Matrix make_matrix(int64_t n_in, int64_t n_out, uint32_t seed, bool random_bits) {
  Matrix w;
  const size_t rb = row_bytes(DType::MXFP4, n_in), stride = rb + 5;
  w.bytes.assign(stride * size_t(n_out), 0);
  std::mt19937 rng(seed);
  for (int64_t o = 0; o < n_out; ++o) {
    uint8_t* row = w.bytes.data() + size_t(o) * stride;
    if (!random_bits) {
      const auto f = test::random_floats(size_t(n_in), seed * 31u + uint32_t(o), 0.05f);
      quantize_row_ref(DType::MXFP4, f.data(), row, n_in);
      continue;
    }
    for (size_t i = 0; i < rb; ++i) row[i] = uint8_t(rng());
    for (int64_t b = 0; b < n_in / 32; ++b) row[size_t(b * 17)] = uint8_t(118 + rng() % 9);
  }
  w.m = {DType::MXFP4, w.bytes.data(), n_in, n_out, stride};
  return w;
}

// The same matrix with the packed copy of its 16-row groups (the n_out % 16 tail rows stay unpacked).
WeightMatrix with_packed(const WeightMatrix& w) {
  WeightMatrix p = w;
  p.packed = cpu::pack_matrix(w.type, w.data, w.n_in, w.n_out, w.row_stride);
  return p;
}

ThreadPool& pool(int n) {
  static std::unique_ptr<ThreadPool> pools[4];
  if (!pools[n]) pools[n] = std::make_unique<ThreadPool>(n);
  return *pools[n];
}

std::vector<Isa> isas() {
  std::vector<Isa> out;
  for (int i = 0; i <= int(cpu::detected_isa()); ++i)
    if (isa_supported(Isa(i))) out.push_back(Isa(i));
  return out;
}

// Rigorous error bound of y[t][o] against the double-precision reference: activations are rounded to
// d*q with |x - d*q| <= d/2, d = amax/127 over their block of 32, so |Δy| <= Σ |w_i| amax_32(i) / 254
// (times act_weight); plus f32 accumulation, <= 2e-5 Σ |w_i x_i| here.
std::vector<double> bound(const WeightMatrix& w, const std::vector<float>& x, int64_t n_tok, double act_weight = 1.01) {
  std::vector<double> b(size_t(n_tok * w.n_out));
  std::vector<float> row(size_t(w.n_in));
  for (int64_t o = 0; o < w.n_out; ++o) {
    dequantize_row_ref(w.type, static_cast<const uint8_t*>(w.data) + size_t(o) * w.row_stride, row.data(), w.n_in);
    for (int64_t t = 0; t < n_tok; ++t) {
      const float* xt = x.data() + t * w.n_in;
      double q = 0, a = 0;
      for (int64_t i0 = 0; i0 < w.n_in; i0 += 32) {
        double amax = 0;
        for (int64_t i = i0; i < i0 + 32; ++i) amax = std::max(amax, double(std::fabs(xt[i])));
        for (int64_t i = i0; i < i0 + 32; ++i) {
          q += std::fabs(double(row[size_t(i)])) * amax / 254.0;
          a += std::fabs(double(row[size_t(i)]) * xt[i]);
        }
      }
      b[size_t(t * w.n_out + o)] = act_weight * q + 2e-5 * a + 1e-30;
    }
  }
  return b;
}

TEST(Mxfp4Matmul, MatchesReference) {
  struct Shape { int64_t blocks, n_out; };
  const Shape shapes[] = {{1, 1}, {3, 7}, {5, 33}, {90, 17}, {2, 48}};  // 90 blocks: gpt-oss's 2880
  for (bool random_bits : {false, true})
    for (const Shape& s : shapes)
      for (bool packed : {false, true}) {
      const int64_t n_in = s.blocks * 32;
      Matrix w = make_matrix(n_in, s.n_out, uint32_t(n_in + s.n_out), random_bits);
      if (packed) {
        w.m = with_packed(w.m);
        ASSERT_EQ(w.m.packed != nullptr, s.n_out >= 16);
      }
      for (int64_t n_tok = 1; n_tok <= 9; ++n_tok) {
        SCOPED_TRACE(testing::Message() << "random_bits=" << random_bits << " packed=" << packed << " n_in=" << n_in
                                        << " n_out=" << s.n_out << " n_tok=" << n_tok);
        const auto x = test::random_floats(size_t(n_in * n_tok), uint32_t(n_tok * 13 + s.n_out));
        std::vector<float> ref(size_t(n_tok * s.n_out));
        matmul_ref(w.m, x.data(), ref.data(), n_tok);
        const auto tol = bound(w.m, x, n_tok);
        for (Isa isa : isas()) {
          SCOPED_TRACE(isa_name(isa));
          IsaScope scope(isa);
          std::vector<float> y(ref.size(), NAN);
          matmul(w.m, x.data(), y.data(), n_tok, pool(1 + int(n_tok % 3)));
          for (size_t i = 0; i < y.size(); ++i)
            ASSERT_NEAR(y[i], ref[i], tol[i]) << "token " << i / size_t(s.n_out) << " row " << i % size_t(s.n_out);
        }
      }
    }
}

// All 11 tokens in one call, then every range [t0, t0 + nt) alone (1 and 3 threads): bytes equal.
TEST(Mxfp4Matmul, BatchInvariant) {
  const int64_t n_in = 7 * 32, n_out = 35, n_tok = 11;
  Matrix w = make_matrix(n_in, n_out, 9, false);
  const auto x = test::random_floats(size_t(n_in * n_tok), 10);
  for (bool packed : {false, true})
  for (Isa isa : isas()) {
    SCOPED_TRACE(testing::Message() << isa_name(isa) << " packed=" << packed);
    if (packed && !w.m.packed) w.m = with_packed(w.m);
    IsaScope scope(isa);
    std::vector<float> all(size_t(n_out * n_tok));
    matmul(w.m, x.data(), all.data(), n_tok, pool(2));
    for (int threads : {1, 3})
      for (int64_t nt = 1; nt <= 8; ++nt)
        for (int64_t t0 : {int64_t(0), n_tok - nt}) {
          std::vector<float> part(size_t(n_out * nt));
          matmul(w.m, x.data() + t0 * n_in, part.data(), nt, pool(threads));
          ASSERT_EQ(0, std::memcmp(part.data(), all.data() + t0 * n_out, part.size() * sizeof(float)))
              << "tokens [" << t0 << ", " << t0 + nt << ") threads " << threads;
        }
  }
}

// The SIMD kernels agree with the scalar one to float rounding (same integers, other float order).
TEST(Mxfp4Matmul, IsasAgree) {
  if (cpu::detected_isa() == Isa::Scalar) GTEST_SKIP() << "no SIMD";
  const int64_t n_in = 4096 + 96, n_out = 24, n_tok = 5;
  Matrix w = make_matrix(n_in, n_out, 21, true);
  w.m = with_packed(w.m);  // 16 packed rows and 8 tail rows
  const auto x = test::random_floats(size_t(n_in * n_tok), 22);
  std::vector<float> scalar(size_t(n_out * n_tok));
  const auto tol = bound(w.m, x, n_tok, 0.0);
  {
    IsaScope s(Isa::Scalar);
    matmul(w.m, x.data(), scalar.data(), n_tok, pool(2));
  }
  for (Isa isa : isas()) {
    IsaScope s(isa);
    std::vector<float> y(scalar.size());
    matmul(w.m, x.data(), y.data(), n_tok, pool(2));
    for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], scalar[i], tol[i]) << isa_name(isa) << " " << i;
  }
}

}  // namespace
}  // namespace polykv
