// Ternary matmul kernels (backend/cpu/ternary_kernels*.cpp) against matmul_ref on every ISA this CPU
// has, for 1..8 tokens and awkward shapes (a PTQ1_0 row of an odd number of 128-blocks, one row,
// rows not a multiple of anything), weights quantized from floats and random bytes (TQ2_0's code 3
// included); and batch invariance: a token's outputs are bit-identical alone or with 1..10 others.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "backend/cpu/matmul.h"
#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/ternary_kernels.h"
#include "core/fp16.h"
#include "core/isa.h"
#include "quant/quant.h"
#include "quant/ternary.h"
#include "test_util.h"

namespace polykv {
namespace {

using cpu::Isa;
const DType kTernary[] = {DType::TQ1_0, DType::TQ2_0, DType::PTQ1_0};

struct Matrix {
  std::vector<uint8_t> bytes;
  WeightMatrix m;
};

// n_out rows 8 bytes apart beyond their size; quantized from random floats, or random bytes with a
// random fp16 scale in [-0.05, 0.05] per block.
Matrix make_matrix(DType t, int64_t n_in, int64_t n_out, uint32_t seed, bool random_bits) {
  Matrix w;
  const size_t rb = row_bytes(t, n_in), stride = rb + 8;
  w.bytes.assign(stride * size_t(n_out), 0);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  const DTypeInfo& info = dtype_info(t);
  for (int64_t o = 0; o < n_out; ++o) {
    uint8_t* row = w.bytes.data() + size_t(o) * stride;
    if (!random_bits) {
      const auto f = test::random_floats(size_t(n_in), seed * 31u + uint32_t(o));
      quantize_row_ref(t, f.data(), row, n_in);
      continue;
    }
    for (size_t i = 0; i < rb; ++i) row[i] = uint8_t(rng());
    for (int64_t b = 0; b < n_in / info.block_size; ++b) {
      const uint16_t h = f32_to_fp16(scale(rng));
      std::memcpy(row + size_t((b + 1) * info.type_size - 2), &h, 2);  // d is the last field
    }
  }
  w.m = {t, w.bytes.data(), n_in, n_out, stride};
  return w;
}

ThreadPool& pool(int n) {
  static std::unique_ptr<ThreadPool> pools[4];
  if (!pools[n]) pools[n] = std::make_unique<ThreadPool>(n);
  return *pools[n];
}

struct IsaGuard {
  explicit IsaGuard(Isa isa) { cpu::set_isa_override(isa); }
  ~IsaGuard() { cpu::clear_isa_override(); }
};

// Every kernel set this CPU and build can run (core/isa.h): scalar, then avx2 / avx512 on x86, neon on ARM64.
std::vector<Isa> isas() { return supported_isas(); }

// Rigorous error bound of y[t][o] against the double-precision reference: activations are rounded to
// d*q with |x - d*q| <= d/2, d = amax/127 over their block (32 or 256 values, within the enclosing
// 256), so |Δy| <= Σ |w_i| amax_256(i) / 254; plus f32 accumulation, <= 2e-5 Σ |w_i x_i| here.
std::vector<double> bound(const WeightMatrix& w, const std::vector<float>& x, int64_t n_tok,
                          double act_weight = 1.01) {
  std::vector<double> b(size_t(n_tok * w.n_out));
  std::vector<float> row(size_t(w.n_in));
  for (int64_t o = 0; o < w.n_out; ++o) {
    dequantize_row_ref(w.type, static_cast<const uint8_t*>(w.data) + size_t(o) * w.row_stride, row.data(), w.n_in);
    for (int64_t t = 0; t < n_tok; ++t) {
      const float* xt = x.data() + t * w.n_in;
      double q = 0, a = 0;
      for (int64_t i0 = 0; i0 < w.n_in; i0 += 256) {
        const int64_t i1 = std::min<int64_t>(w.n_in, i0 + 256);
        double amax = 0;
        for (int64_t i = i0; i < i1; ++i) amax = std::max(amax, double(std::fabs(xt[i])));
        for (int64_t i = i0; i < i1; ++i) {
          q += std::fabs(double(row[size_t(i)])) * amax / 254.0;
          a += std::fabs(double(row[size_t(i)]) * xt[i]);
        }
      }
      b[size_t(t * w.n_out + o)] = act_weight * q + 2e-5 * a + 1e-30;
    }
  }
  return b;
}

TEST(TernaryMatmul, MatchesReference) {
  struct Shape { int64_t blocks, n_out; };
  const Shape shapes[] = {{1, 1}, {3, 7}, {5, 33}, {2, 17}};
  for (DType t : kTernary)
    for (bool random_bits : {false, true})
      for (const Shape& s : shapes) {
        const int64_t n_in = s.blocks * dtype_info(t).block_size;
        const Matrix w = make_matrix(t, n_in, s.n_out, uint32_t(n_in + s.n_out), random_bits);
        for (int64_t n_tok = 1; n_tok <= 8; ++n_tok) {
          SCOPED_TRACE(testing::Message() << dtype_name(t) << " random_bits=" << random_bits << " n_in=" << n_in
                                          << " n_out=" << s.n_out << " n_tok=" << n_tok);
          const auto x = test::random_floats(size_t(n_in * n_tok), uint32_t(n_tok * 13 + s.n_out));
          std::vector<float> ref(size_t(n_tok * s.n_out));
          matmul_ref(w.m, x.data(), ref.data(), n_tok);
          const auto tol = bound(w.m, x, n_tok);
          for (Isa isa : isas()) {
            SCOPED_TRACE(cpu::isa_name(isa));
            IsaGuard guard(isa);
            std::vector<float> y(ref.size(), NAN);
            matmul(w.m, x.data(), y.data(), n_tok, pool(1 + int(n_tok % 3)));
            for (size_t i = 0; i < y.size(); ++i)
              ASSERT_NEAR(y[i], ref[i], tol[i]) << "token " << i / size_t(s.n_out) << " row " << i % size_t(s.n_out);
          }
        }
      }
}

// All 11 tokens in one call, then every range [t0, t0 + nt) alone (1 and 3 threads): bytes equal.
// PTQ1_0 also at 6 blocks (768 values: Q8_K activations, the VBMI kernel where the CPU has it).
TEST(TernaryMatmul, BatchInvariant) {
  struct Case { DType t; int64_t blocks; };
  for (const Case c : {Case{DType::TQ1_0, 3}, Case{DType::TQ2_0, 3}, Case{DType::PTQ1_0, 3}, Case{DType::PTQ1_0, 6}}) {
    const DType t = c.t;
    const int64_t n_in = c.blocks * dtype_info(t).block_size, n_out = 19, n_tok = 11;
    const Matrix w = make_matrix(t, n_in, n_out, 9, false);
    const auto x = test::random_floats(size_t(n_in * n_tok), 10);
    for (Isa isa : isas()) {
      SCOPED_TRACE(testing::Message() << dtype_name(t) << " n_in=" << n_in << " " << cpu::isa_name(isa));
      IsaGuard guard(isa);
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
}

// The SIMD kernels agree with the scalar ones to float rounding (same integers, other float order).
TEST(TernaryMatmul, IsasAgree) {
  if (cpu::detected_isa() == Isa::Scalar) GTEST_SKIP() << "no SIMD";
  for (DType t : kTernary) {
    const int64_t n_in = 4096, n_out = 24, n_tok = 5;
    const Matrix w = make_matrix(t, n_in, n_out, 21, true);
    const auto x = test::random_floats(size_t(n_in * n_tok), 22);
    std::vector<float> scalar(size_t(n_out * n_tok));
    const auto tol = bound(w.m, x, n_tok, 0.0);
    {
      IsaGuard g(Isa::Scalar);
      matmul(w.m, x.data(), scalar.data(), n_tok, pool(2));
    }
    for (Isa isa : isas()) {
      IsaGuard g(isa);
      std::vector<float> y(scalar.size());
      matmul(w.m, x.data(), y.data(), n_tok, pool(2));
      for (size_t i = 0; i < y.size(); ++i)
        ASSERT_NEAR(y[i], scalar[i], tol[i]) << dtype_name(t) << " " << cpu::isa_name(isa);
    }
  }
}

// The VBMI activation permutation (ternary_kernels_avx512vbmi.cpp) against its scalar reference, and
// the reference against the layout itself: permuted byte 64n + m is the activation of the value that
// ternary_block_values puts at digit n of code byte m (checked through single-value blocks).
TEST(TernaryMatmul, VbmiPermutation) {
  for (DType t : {DType::TQ1_0, DType::PTQ1_0}) {
    SCOPED_TRACE(dtype_name(t));
    const bool tq1 = t == DType::TQ1_0;
    // Reference layout from the decoder: a block whose only non-zero code byte m... (codes c = t + 1:
    // byte 0 decodes to all-zero codes, i.e. t = -1 everywhere, so vary one byte and diff).
    const int n_code = tq1 ? 52 : 26, n_blk = tq1 ? 1 : 2;
    uint8_t blk[54] = {};
    int8_t base[256], v[256];
    ternary_block_values(t, blk, base);
    std::vector<int> where(256, -1);  // value -> 64 n + m (+ 32 for PTQ1_0's second block)
    for (int m = 0; m < n_code; ++m)
      for (int n = 0; n < 5; ++n) {
        // the byte whose digit n is 1 and the others 0: ceil(3^(4-n) * 256 / 243) (qh bytes: the
        // 4 digits shifted by one, i.e. 3^(4-n) for n < 4 as well)
        int q = 1;
        for (int k = 0; k < 4 - n; ++k) q *= 3;
        std::memset(blk, 0, sizeof blk);
        blk[m] = uint8_t((q * 256 + 242) / 243);
        ternary_block_values(t, blk, v);
        const int nv = tq1 ? 256 : 128;
        int found = -1, count = 0;
        for (int i = 0; i < nv; ++i)
          if (v[i] != base[i]) found = i, ++count;
        if (count == 0) continue;  // a qh byte's digit 4
        ASSERT_EQ(count, 1) << "m=" << m << " n=" << n;
        for (int h = 0; h < n_blk; ++h) where[size_t(found + 128 * h)] = 64 * n + m + 32 * h;
      }
    for (int64_t n_in : {256, 768, 4096}) {
      std::mt19937 rng{uint32_t(n_in)};
      std::vector<int8_t> qs(static_cast<size_t>(n_in));
      std::vector<int16_t> bsums(static_cast<size_t>(n_in / 16), int16_t(0));
      for (int64_t i = 0; i < n_in; ++i) {
        qs[size_t(i)] = int8_t(int(rng() % 255) - 127);
        bsums[size_t(i / 16)] = int16_t(bsums[size_t(i / 16)] + qs[size_t(i)]);
      }
      const size_t bytes = cpu::ternary_perm_bytes(t, n_in);
      ASSERT_EQ(bytes, size_t(n_in / 256) * 328);
      std::vector<int8_t> ref(bytes, 99);
      cpu::ternary_permute_act(t, qs.data(), bsums.data(), n_in, ref.data());
      const int64_t nb = n_in / 256;
      for (int64_t b = 0; b < nb; ++b) {
        std::vector<int> seen(320, -1);
        for (int i = 0; i < 256; ++i) {
          ASSERT_GE(where[size_t(i)], 0) << "value " << i << " has no byte";
          ASSERT_EQ(ref[size_t(320 * b + where[size_t(i)])], qs[size_t(256 * b + i)]) << "value " << i;
          seen[size_t(where[size_t(i)])] = i;
        }
        for (int j = 0; j < 320; ++j)
          if (seen[size_t(j)] < 0) ASSERT_EQ(ref[size_t(320 * b + j)], 0) << "byte " << j;
        int32_t s[2] = {0, 0}, got[2];
        for (int i = 0; i < 256; ++i) s[tq1 ? 0 : i / 128] += qs[size_t(256 * b + i)];
        std::memcpy(got, ref.data() + 320 * nb + 8 * b, 8);
        EXPECT_EQ(got[0], -s[0]);
        EXPECT_EQ(got[1], -s[1]);
      }
      cpu::set_ternary_vbmi_kernels(1);  // where the CPU has VBMI, whatever the default for the type
      const bool have = cpu::ternary_row_dot_avx512vbmi(t) != nullptr;
      cpu::set_ternary_vbmi_kernels(-1);
      if (!have) continue;
      std::vector<int8_t> fast(bytes, 77);
      cpu::ternary_permute_act_vbmi(t, qs.data(), bsums.data(), n_in, fast.data());
      EXPECT_EQ(0, std::memcmp(fast.data(), ref.data(), bytes)) << "n_in=" << n_in;
    }
  }
}

// The VBMI kernels (where the CPU has them) and the 2026-12-01f ones with them switched off, against
// matmul_ref: rows of whole 256s (the VBMI path), 1..8 tokens, random bytes (codes of bytes 243..255
// included) and all-0xFF rows against activations of ±max, row counts not a multiple of anything.
TEST(TernaryMatmul, VbmiMatchesReference) {
  if (cpu::detected_isa() != Isa::Avx512) GTEST_SKIP() << "no AVX-512";
  cpu::set_ternary_vbmi_kernels(1);  // both types wherever the CPU has VBMI
  const bool have = cpu::ternary_row_dot_avx512vbmi(DType::TQ1_0) != nullptr;
  cpu::set_ternary_vbmi_kernels(-1);
  if (!have) std::printf("no VBMI kernels here: checking the AVX-512 ones only\n");
  for (DType t : {DType::TQ1_0, DType::PTQ1_0})
    for (int64_t n_in : {256, 1280, 4096})
      for (int64_t n_out : {1, 7, 33})
        for (int kind = 0; kind < 2; ++kind) {
          Matrix w = make_matrix(t, n_in, n_out, uint32_t(n_in * 3 + n_out), true);
          std::vector<float> x;
          if (kind == 1) {  // all code bytes 0xFF (every digit 2 or 0), activations ±1 (all at the max)
            const DTypeInfo& info = dtype_info(t);
            for (int64_t o = 0; o < n_out; ++o)
              for (int64_t b = 0; b < n_in / info.block_size; ++b)
                std::memset(w.bytes.data() + size_t(o) * w.m.row_stride + size_t(b * info.type_size), 0xFF,
                            size_t(info.type_size - 2));
            x.resize(size_t(n_in * 8));
            for (size_t i = 0; i < x.size(); ++i) x[i] = (i * 7 % 3) ? 1.0f : -1.0f;
          } else {
            x = test::random_floats(size_t(n_in * 8), uint32_t(n_in + n_out));
          }
          for (int64_t n_tok = 1; n_tok <= 8; ++n_tok) {
            SCOPED_TRACE(testing::Message() << dtype_name(t) << " n_in=" << n_in << " n_out=" << n_out
                                            << " kind=" << kind << " n_tok=" << n_tok);
            std::vector<float> ref(size_t(n_tok * n_out));
            matmul_ref(w.m, x.data(), ref.data(), n_tok);
            const auto tol = bound(w.m, x, n_tok);
            IsaGuard guard(Isa::Avx512);
            for (bool vbmi : {true, false}) {
              cpu::set_ternary_vbmi_kernels(vbmi ? 1 : 0);
              EXPECT_EQ(cpu::ternary_wants_perm(Isa::Avx512, t, n_in), have && vbmi);
              std::vector<float> y(ref.size(), NAN);
              matmul(w.m, x.data(), y.data(), n_tok, pool(1 + int(n_tok % 3)));
              cpu::set_ternary_vbmi_kernels(-1);
              for (size_t i = 0; i < y.size(); ++i)
                ASSERT_NEAR(y[i], ref[i], tol[i]) << "vbmi=" << vbmi << " token " << i / size_t(n_out) << " row "
                                                  << i % size_t(n_out);
            }
          }
        }
}

}  // namespace
}  // namespace polykv
