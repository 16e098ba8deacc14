// The ternary LUT path (backend/cpu/ternary_lut.h): the value map against the block decoder, the packed
// kernels (AVX-512 VBMI where the CPU has it, and the scalar one over the packed layout) bit for bit against
// the reference that reads the original rows, the 16-bit partial sums at their extremes, and matmul() with a
// packed matrix: tail rows, batch invariance, against matmul_ref.
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
#include "backend/cpu/ternary_lut.h"
#include "core/fp16.h"
#include "core/isa.h"
#include "core/thread_pool.h"
#include "quant/quant.h"
#include "quant/ternary.h"
#include "q8k_acts.h"
#include "test_util.h"

namespace polykv {
namespace {

const DType kTypes[] = {DType::TQ1_0, DType::TQ2_0, DType::PTQ1_0};

size_t span_bytes(DType t) { return row_bytes(t, 256); }

// Rows of n_in values, `pad` bytes apart beyond their size: quantized floats, or random bytes (any code,
// TQ2_0's 3 included) with random fp16 scales.
std::vector<uint8_t> make_rows(DType t, int64_t n_in, int64_t n_out, size_t stride, uint32_t seed, bool random_bits) {
  std::vector<uint8_t> bytes(stride * size_t(n_out), 0);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  const DTypeInfo& info = dtype_info(t);
  for (int64_t o = 0; o < n_out; ++o) {
    uint8_t* row = bytes.data() + size_t(o) * stride;
    if (!random_bits) {
      const auto f = test::random_floats(size_t(n_in), seed * 31u + uint32_t(o));
      quantize_row_ref(t, f.data(), row, n_in);
      continue;
    }
    for (size_t i = 0; i < row_bytes(t, n_in); ++i) row[i] = uint8_t(rng());
    for (int64_t b = 0; b < n_in / info.block_size; ++b) {
      const uint16_t h = f32_to_fp16(scale(rng));
      std::memcpy(row + size_t((b + 1) * info.type_size - 2), &h, 2);
    }
  }
  return bytes;
}

using Acts = test::Q8KActs;

// The AVX-512 VBMI kernel may run (CPU and active ISA).
bool simd_available(DType t) { return cpu::ternary_lut_available(t, 256); }

// |y - matmul_ref| bound per output: the activations' rounding (<= amax / 254 per value) times Σ |w|, plus
// float accumulation.
std::vector<double> bound(const WeightMatrix& w, const std::vector<float>& x, int64_t n_tok) {
  std::vector<double> b(size_t(n_tok * w.n_out));
  std::vector<float> row(size_t(w.n_in));
  for (int64_t o = 0; o < w.n_out; ++o) {
    dequantize_row_ref(w.type, static_cast<const uint8_t*>(w.data) + size_t(o) * w.row_stride, row.data(), w.n_in);
    for (int64_t t = 0; t < n_tok; ++t) {
      double q = 0, a = 0;
      for (int64_t i0 = 0; i0 < w.n_in; i0 += 256) {
        double amax = 0;
        for (int64_t i = i0; i < i0 + 256; ++i) amax = std::max(amax, double(std::fabs(x[size_t(t * w.n_in + i)])));
        for (int64_t i = i0; i < i0 + 256; ++i) {
          q += std::fabs(double(row[size_t(i)])) * amax / 254.0;
          a += std::fabs(double(row[size_t(i)]) * x[size_t(t * w.n_in + i)]);
        }
      }
      b[size_t(t * w.n_out + o)] = 1.01 * q + 2e-5 * a + 1e-30;
    }
  }
  return b;
}

ThreadPool& pool(int n) {
  static std::unique_ptr<ThreadPool> pools[4];
  if (!pools[n]) pools[n] = std::make_unique<ThreadPool>(n);
  return *pools[n];
}

// Every value of a 256-value span is digit n of exactly one code byte m, and lut_digit_value of that byte
// is what the decoder gives (random spans).
TEST(TernaryLut, ValueMapMatchesDecoder) {
  for (DType t : kTypes) {
    SCOPED_TRACE(dtype_name(t));
    const cpu::LutShape sh = cpu::lut_shape(t);
    std::vector<int> seen(256, 0);
    for (int m = 0; m < sh.n_code; ++m)
      for (int n = 0; n < 5; ++n) {
        const int v = cpu::lut_value_index(t, m, n);
        if (v >= 0) ++seen[size_t(v)];
      }
    for (int v = 0; v < 256; ++v) ASSERT_EQ(seen[size_t(v)], 1) << "value " << v;
    std::mt19937 rng(7);
    const size_t span = span_bytes(t);
    std::vector<uint8_t> blk(span);
    for (int rep = 0; rep < 200; ++rep) {
      for (auto& b : blk) b = uint8_t(rng());
      int8_t vals[256];
      const int per = dtype_info(t).block_size;
      for (int h = 0; h < 256 / per; ++h) ternary_block_values(t, blk.data() + size_t(h) * dtype_info(t).type_size, vals + h * per);
      for (int m = 0; m < sh.n_code; ++m) {
        const size_t off = t == DType::PTQ1_0 ? size_t(m / 26) * 28 + size_t(m % 26) : size_t(m);
        for (int n = 0; n < 5; ++n) {
          const int v = cpu::lut_value_index(t, m, n);
          if (v >= 0) ASSERT_EQ(cpu::lut_digit_value(t, blk[off], n), vals[v]) << "m=" << m << " n=" << n;
        }
      }
    }
  }
}

// The packed kernels against ternary_lut_ref: equal bytes, for 1..8, 11 and 17 tokens, chunk ranges that
// start and end anywhere, weights quantized and random, activations random and saturated.
TEST(TernaryLut, PackedKernelsMatchTheReferenceBitForBit) {
  struct Shape { int64_t n_in, n_out; };
  for (DType t : kTypes)
    for (const Shape s : {Shape{256, 64}, Shape{768, 130}, Shape{2560, 200}, Shape{512, 1221}})
      for (bool random_bits : {false, true}) {
        SCOPED_TRACE(testing::Message() << dtype_name(t) << " n_in=" << s.n_in << " n_out=" << s.n_out
                                        << " random_bits=" << random_bits);
        const size_t stride = row_bytes(t, s.n_in) + 6;
        const auto bytes = make_rows(t, s.n_in, s.n_out, stride, uint32_t(s.n_in + s.n_out), random_bits);
        const auto p = cpu::pack_ternary_lut(t, bytes.data(), s.n_in, s.n_out, stride);
        ASSERT_NE(p, nullptr);
        ASSERT_EQ(p->n_groups, s.n_out / 64);
        const int64_t rows = p->n_groups * 64;
        for (int n_tok : {1, 2, 3, 4, 5, 6, 7, 8, 11, 17}) {
          SCOPED_TRACE(n_tok);
          auto x = test::random_floats(size_t(s.n_in * n_tok), uint32_t(n_tok * 5 + 1));
          if (n_tok == 3)  // one token all at +max, one at -max: every activation byte at +-127
            for (int64_t i = 0; i < s.n_in; ++i) x[size_t(i)] = 1.0f, x[size_t(s.n_in + i)] = -1.0f;
          const Acts a(x, s.n_in, n_tok);
          std::vector<float> ref(size_t(rows * n_tok));
          cpu::ternary_lut_ref(t, bytes.data(), s.n_in, rows, stride, a.rows.data(), n_tok, ref.data(), rows);
          for (int kernel = 0; kernel < 2; ++kernel) {
            if (kernel == 1 && !simd_available(t)) continue;
            std::vector<float> y(ref.size(), NAN);
            // two ranges, split unevenly
            const int64_t mid = p->n_groups / 3;
            for (const auto [c0, c1] : {std::pair{int64_t(0), mid}, std::pair{mid, p->n_groups}}) {
              if (kernel == 0) cpu::ternary_lut_matmul_scalar(*p, c0, c1, a.rows.data(), n_tok, y.data(), rows);
              else cpu::ternary_lut_matmul_avx512vbmi(*p, c0, c1, a.rows.data(), n_tok, y.data(), rows);
            }
            ASSERT_EQ(0, std::memcmp(y.data(), ref.data(), y.size() * sizeof(float)))
                << (kernel == 0 ? "scalar" : "avx512vbmi");
          }
        }
      }
}

// Codes whose digits sum to the largest (smallest) value at every position, against activations all at
// +127: the 16-bit partial sums at their bounds (32512 for TQ1_0 and the TQ2_0 halves).
TEST(TernaryLut, PartialSumsAtTheirBounds) {
  for (DType t : kTypes) {
    SCOPED_TRACE(dtype_name(t));
    const cpu::LutShape sh = cpu::lut_shape(t);
    const int64_t n_in = 512, n_out = 128;
    const size_t span = span_bytes(t), stride = row_bytes(t, n_in);
    std::vector<uint8_t> bytes(stride * size_t(n_out), 0);
    for (int64_t o = 0; o < n_out; ++o) {
      const int sign = o % 2 == 0 ? 1 : -1;
      for (int64_t b = 0; b < n_in / 256; ++b) {
        uint8_t* blk = bytes.data() + size_t(o) * stride + size_t(b) * span;
        for (int m = 0; m < sh.n_code; ++m) {
          int best = -1000, best_q = 0;
          for (int q = 0; q < 256; ++q) {
            int s = 0;
            for (int n = 0; n < 5; ++n)
              if (cpu::lut_value_index(t, m, n) >= 0) s += sign * cpu::lut_digit_value(t, uint8_t(q), n);
            if (s > best) best = s, best_q = q;
          }
          blk[t == DType::PTQ1_0 ? size_t(m / 26) * 28 + size_t(m % 26) : size_t(m)] = uint8_t(best_q);
        }
        const uint16_t one = f32_to_fp16(1.0f);
        for (int h = 0; h < int(256 / dtype_info(t).block_size); ++h)
          std::memcpy(blk + size_t((h + 1) * dtype_info(t).type_size - 2), &one, 2);
      }
    }
    const std::vector<float> x(size_t(n_in), 1.0f);
    const Acts a(x, n_in, 1);
    ASSERT_EQ(a.qs[0], 127);
    std::vector<float> ref(static_cast<size_t>(n_out));
    cpu::ternary_lut_ref(t, bytes.data(), n_in, n_out, stride, a.rows.data(), 1, ref.data(), n_out);
    const float per_block = t == DType::TQ2_0 ? 2.0f * 256 : 256.0f;  // TQ2_0's code 3 is +2
    EXPECT_FLOAT_EQ(ref[0] / a.d[0], 2 * per_block * 127);
    const auto p = cpu::pack_ternary_lut(t, bytes.data(), n_in, n_out, stride);
    for (int kernel = 0; kernel < 2; ++kernel) {
      if (kernel == 1 && !simd_available(t)) continue;
      std::vector<float> y(size_t(n_out), NAN);
      if (kernel == 0) cpu::ternary_lut_matmul_scalar(*p, 0, p->n_groups, a.rows.data(), 1, y.data(), n_out);
      else cpu::ternary_lut_matmul_avx512vbmi(*p, 0, p->n_groups, a.rows.data(), 1, y.data(), n_out);
      ASSERT_EQ(0, std::memcmp(y.data(), ref.data(), y.size() * sizeof(float))) << kernel;
    }
  }
}

// matmul() with the packed matrix: close to matmul_ref (tail rows included), the original not read when
// every row is packed, and every token range alone equal to the whole batch, on 1 and 3 threads.
TEST(TernaryLut, MatmulWithPackedRows) {
  for (DType t : kTypes) {
    if (!cpu::ternary_lut_available(t, 256)) GTEST_SKIP() << "no LUT kernel on this CPU / ISA";
    for (const int64_t n_out : {int64_t(576), int64_t(600)}) {
      SCOPED_TRACE(testing::Message() << dtype_name(t) << " n_out=" << n_out);
      const int64_t n_in = 1024, n_tok = 11;
      const size_t stride = row_bytes(t, n_in);
      auto bytes = make_rows(t, n_in, n_out, stride, 3, false);
      WeightMatrix w{t, bytes.data(), n_in, n_out, stride};
      WeightMatrix small{t, bytes.data(), n_in, cpu::kLutMinRows - 64, stride};
      pack_for_matmul(small);
      EXPECT_EQ(small.packed, nullptr);  // below kLutMinRows: the row kernels
      pack_for_matmul(w);
      ASSERT_NE(w.packed, nullptr);
      EXPECT_EQ(matmul_reads_original(w), n_out % 64 != 0);
      const auto x = test::random_floats(size_t(n_in * n_tok), 4);
      std::vector<float> all(size_t(n_out * n_tok)), ref(all.size());
      matmul(w, x.data(), all.data(), n_tok, pool(2));
      matmul_ref(w, x.data(), ref.data(), n_tok);
      const auto tol = bound(w, x, n_tok);
      for (size_t i = 0; i < all.size(); ++i) ASSERT_NEAR(all[i], ref[i], tol[i]) << i;
      for (int threads : {1, 3})
        for (int64_t nt = 1; nt <= 8; ++nt)
          for (int64_t t0 : {int64_t(0), n_tok - nt}) {
            std::vector<float> part(size_t(n_out * nt));
            matmul(w, x.data() + t0 * n_in, part.data(), nt, pool(threads));
            ASSERT_EQ(0, std::memcmp(part.data(), all.data() + t0 * n_out, part.size() * sizeof(float)))
                << "tokens [" << t0 << ", " << t0 + nt << ") threads " << threads;
          }
      // The scalar ISA reads the same packed copy with the scalar LUT kernel: the same bytes.
      cpu::set_isa_override(cpu::Isa::Scalar);
      std::vector<float> scalar(all.size());
      matmul(w, x.data(), scalar.data(), n_tok, pool(2));
      cpu::clear_isa_override();
      for (int64_t tok = 0; tok < n_tok; ++tok)
        ASSERT_EQ(0, std::memcmp(scalar.data() + tok * n_out, all.data() + tok * n_out, 576 * sizeof(float)));
    }
  }
}

}  // namespace
}  // namespace polykv
