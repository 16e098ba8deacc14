// Ternary row kernels (backend/cpu/ternary_kernels*), 2026-12-01f changes:
// - PTQ1_0 rows of whole 256 values read Q8_K activations (ptq1_0_reads_q8_K), other rows Q8_32: the
//   result equals Σ_b d_b * d_act(b/2) * Σ t*q computed here from the scalar Q8_K quantizer, and every
//   ISA agrees with the scalar kernel, for both paths, 1..8 tokens, rows not a multiple of anything;
// - the kernels prefetch ahead of the block they read: a matrix ending right before an unmapped page
//   still reads only its own bytes (a load past the end would fault; prefetches do not).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "backend/cpu/matmul.h"
#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/ternary_kernels.h"
#include "core/fp16.h"
#include "core/isa.h"
#include "core/thread_pool.h"
#include "quant/quant.h"
#include "quant/ternary.h"
#include "test_util.h"

namespace polykv {
namespace {

using cpu::Isa;

struct IsaGuard {
  explicit IsaGuard(Isa isa) { cpu::set_isa_override(isa); }
  ~IsaGuard() { cpu::clear_isa_override(); }
};

// Selects the current or the pre-2026-12-01f kernels (the benchmark's switch) for a scope.
struct OldKernelsGuard {
  explicit OldKernelsGuard(bool old) : was(cpu::ternary_old_kernels()) { cpu::set_ternary_old_kernels(old); }
  ~OldKernelsGuard() { cpu::set_ternary_old_kernels(was); }
  bool was;
};

// Every kernel set this CPU and build can run (core/isa.h): scalar, then avx2 / avx512 on x86, neon on ARM64.
std::vector<Isa> isas() { return supported_isas(); }

// n_out rows of random bytes (every code 0..2 of base-3 bytes, any byte) with random fp16 scales.
std::vector<uint8_t> random_rows(DType t, int64_t n_in, int64_t n_out, uint32_t seed) {
  const DTypeInfo& info = dtype_info(t);
  std::vector<uint8_t> bytes(row_bytes(t, n_in) * size_t(n_out));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  for (uint8_t& b : bytes) b = uint8_t(rng());
  for (size_t b = 0; b < bytes.size() / size_t(info.type_size); ++b) {
    const uint16_t h = f32_to_fp16(scale(rng));
    std::memcpy(&bytes[(b + 1) * size_t(info.type_size) - 2], &h, 2);
  }
  return bytes;
}

// Σ over the 256-value activation blocks of a PTQ1_0 row against Q8_K activations, in double.
double ptq1_0_q8_K_dot(const uint8_t* row, int64_t n_in, const float* x) {
  std::vector<int8_t> qs(static_cast<size_t>(n_in));
  std::vector<float> d(size_t(n_in / 256));
  std::vector<int16_t> bsums(size_t(n_in / 16));
  cpu::quantize_act_q8_K(x, n_in, qs.data(), d.data(), bsums.data());
  double y = 0;
  int8_t t[kQK_PTQ1_0];
  for (int64_t b = 0; b < n_in / kQK_PTQ1_0; ++b) {
    const auto* blk = reinterpret_cast<const BlockPTQ1_0*>(row) + b;
    ternary_block_values(DType::PTQ1_0, blk, t);
    int64_t s = 0;
    for (int i = 0; i < kQK_PTQ1_0; ++i) s += int64_t(t[i]) * qs[size_t(b * kQK_PTQ1_0 + i)];
    y += double(fp16_to_f32(blk->d)) * double(d[size_t(b / 2)]) * double(s);
  }
  return y;
}

TEST(TernaryKernels, Ptq1_0WholeRowsReadQ8K) {
  OldKernelsGuard current(false);
  EXPECT_TRUE(cpu::ptq1_0_reads_q8_K(256));
  EXPECT_TRUE(cpu::ptq1_0_reads_q8_K(4096));
  EXPECT_FALSE(cpu::ptq1_0_reads_q8_K(128));
  EXPECT_FALSE(cpu::ptq1_0_reads_q8_K(640));
  ThreadPool pool(2);
  for (int64_t n_in : {256, 512, 1280}) {
    const int64_t n_out = 13;
    const auto w = random_rows(DType::PTQ1_0, n_in, n_out, uint32_t(n_in));
    const WeightMatrix m{DType::PTQ1_0, w.data(), n_in, n_out, row_bytes(DType::PTQ1_0, n_in)};
    for (int64_t n_tok : {1, 2, 3, 8}) {
      const auto x = test::random_floats(size_t(n_in * n_tok), uint32_t(n_tok));
      for (Isa isa : isas()) {
        SCOPED_TRACE(testing::Message() << cpu::isa_name(isa) << " n_in=" << n_in << " n_tok=" << n_tok);
        IsaGuard g(isa);
        std::vector<float> y(size_t(n_out * n_tok));
        matmul(m, x.data(), y.data(), n_tok, pool);
        for (int64_t t = 0; t < n_tok; ++t)
          for (int64_t o = 0; o < n_out; ++o) {
            const double want = ptq1_0_q8_K_dot(w.data() + size_t(o) * m.row_stride, n_in, x.data() + t * n_in);
            // f32 accumulation of n_in / 128 block terms, each |d d_act s| <= ~0.05 * |x|max/127 * 128 * 127
            ASSERT_NEAR(y[size_t(t * n_out + o)], want, 1e-5 * (1.0 + std::fabs(want))) << "row " << o << " token " << t;
          }
      }
    }
  }
}

// Both PTQ1_0 paths (whole 256s or not) and the two other types: every ISA against the scalar kernels
// to float rounding (same integer block sums), 1..8 tokens, awkward row counts; the current kernels
// and the old ones (the benchmark's switch: no prefetch, PTQ1_0 always on Q8_32).
TEST(TernaryKernels, IsasAgreeWithScalarOnAwkwardShapes) {
  if (cpu::detected_isa() == Isa::Scalar) GTEST_SKIP() << "no SIMD";
  ThreadPool pool(2);
  for (bool old : {false, true}) {
    OldKernelsGuard kernels(old);
    SCOPED_TRACE(old ? "old kernels" : "current kernels");
    struct Case { DType t; int64_t n_in; };
    const Case cases[] = {{DType::PTQ1_0, 128},  {DType::PTQ1_0, 384},  {DType::PTQ1_0, 768}, {DType::PTQ1_0, 4096},
                          {DType::TQ1_0, 256},   {DType::TQ1_0, 1792},  {DType::TQ2_0, 256},  {DType::TQ2_0, 2304}};
    for (const Case& c : cases)
      for (int64_t n_out : {1, 5, 31}) {
        const auto w = random_rows(c.t, c.n_in, n_out, uint32_t(c.n_in * 7 + n_out));
        const WeightMatrix m{c.t, w.data(), c.n_in, n_out, row_bytes(c.t, c.n_in)};
        for (int64_t n_tok = 1; n_tok <= 8; ++n_tok) {
          const auto x = test::random_floats(size_t(c.n_in * n_tok), uint32_t(n_tok * 5 + n_out));
          std::vector<float> scalar(size_t(n_out * n_tok));
          {
            IsaGuard g(Isa::Scalar);
            matmul(m, x.data(), scalar.data(), n_tok, pool);
          }
          for (Isa isa : isas()) {
            SCOPED_TRACE(testing::Message() << dtype_name(c.t) << " " << cpu::isa_name(isa) << " n_in=" << c.n_in
                                            << " n_out=" << n_out << " n_tok=" << n_tok);
            IsaGuard g(isa);
            std::vector<float> y(scalar.size(), NAN);
            matmul(m, x.data(), y.data(), n_tok, pool);
            for (size_t i = 0; i < y.size(); ++i)
              ASSERT_NEAR(y[i], scalar[i], 2e-5 * (1.0 + std::fabs(scalar[i]))) << "index " << i;
          }
        }
      }
  }
}

// A matrix whose last byte is the last byte of a mapped page, the next page unmapped: the kernels
// (which prefetch several KiB ahead) read nothing past the matrix, on every ISA and 1..8 tokens.
TEST(TernaryKernels, NoReadPastTheMatrix) {
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  ThreadPool pool(2);
  for (DType t : {DType::TQ1_0, DType::TQ2_0, DType::PTQ1_0}) {
    const int64_t n_in = t == DType::PTQ1_0 ? 640 : 512, n_out = 9;
    const auto w = random_rows(t, n_in, n_out, 3);
    const size_t span = (w.size() + page - 1) / page * page;
    void* map = mmap(nullptr, span + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(map, MAP_FAILED);
    std::unique_ptr<void, std::function<void(void*)>> unmap(map, [&](void* p) { munmap(p, span + page); });
    uint8_t* base = static_cast<uint8_t*>(map);
    ASSERT_EQ(0, mprotect(base + span, page, PROT_NONE));
    uint8_t* at = base + span - w.size();  // ends at the guard page
    std::memcpy(at, w.data(), w.size());
    const WeightMatrix m{t, at, n_in, n_out, row_bytes(t, n_in)};
    const WeightMatrix copy{t, w.data(), n_in, n_out, row_bytes(t, n_in)};
    for (Isa isa : isas())
      for (int64_t n_tok = 1; n_tok <= 8; ++n_tok) {
        SCOPED_TRACE(testing::Message() << dtype_name(t) << " " << cpu::isa_name(isa) << " n_tok=" << n_tok);
        IsaGuard g(isa);
        const auto x = test::random_floats(size_t(n_in * n_tok), uint32_t(n_tok));
        std::vector<float> y(size_t(n_out * n_tok)), want(y.size());
        matmul(m, x.data(), y.data(), n_tok, pool);
        matmul(copy, x.data(), want.data(), n_tok, pool);
        ASSERT_EQ(0, std::memcmp(y.data(), want.data(), y.size() * sizeof(float)));
      }
  }
}

}  // namespace
}  // namespace polykv
