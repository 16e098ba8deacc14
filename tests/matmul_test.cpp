// matmul() against matmul_ref() for every weight type, on every ISA this CPU has (each forced in
// turn), at awkward shapes and thread counts; and the ISAs against each other.
#include "backend/cpu/matmul.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/packed_weights.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/quant.h"
#include "quant_block_fields.h"
#include "test_util.h"

namespace polykv {
namespace {

using cpu::Isa;

const DType kTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0, DType::Q4_0,
                        DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q2_K, DType::Q3_K,
                        DType::Q4_K, DType::Q5_K, DType::Q6_K};

using test::half_fields;
using test::is_float_type;

// n_out rows of n_in values, row_stride bytes apart (>= the row size, to exercise strides).
// Quantized from random floats with quantize_row_ref where that exists and `random_bits` is false;
// otherwise random bytes (every bit pattern, e.g. q8_0's -128) with the fp16 scales set to small
// sane values so that no block holds inf/nan.
struct Weights {
  std::vector<uint8_t> bytes;
  WeightMatrix m;
};

Weights make_weights(DType t, int64_t n_in, int64_t n_out, uint32_t seed, bool random_bits) {
  Weights w;
  const size_t rb = row_bytes(t, n_in);
  const size_t stride = rb + 16;
  w.bytes.assign(stride * size_t(n_out), 0);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> scale(-0.02f, 0.02f);
  for (int64_t o = 0; o < n_out; ++o) {
    uint8_t* row = w.bytes.data() + size_t(o) * stride;
    if (!random_bits && can_quantize(t)) {
      const auto f = test::random_floats(size_t(n_in), seed * 7919u + uint32_t(o));
      quantize_row_ref(t, f.data(), row, n_in);
    } else if (is_float_type(t)) {  // random_bits makes no sense for floats: avoid nan/inf
      const auto f = test::random_floats(size_t(n_in), seed * 7919u + uint32_t(o));
      for (int64_t i = 0; i < n_in; ++i) {
        if (t == DType::F32) std::memcpy(row + 4 * i, &f[size_t(i)], 4);
        const uint16_t h = t == DType::F16 ? f32_to_fp16(f[size_t(i)]) : f32_to_bf16(f[size_t(i)]);
        if (t != DType::F32) std::memcpy(row + 2 * i, &h, 2);
      }
    } else {
      for (size_t i = 0; i < rb; ++i) row[i] = uint8_t(rng());
      const DTypeInfo& info = dtype_info(t);
      for (int64_t b = 0; b < n_in / info.block_size; ++b)
        for (size_t off : half_fields(t)) {
          const uint16_t h = f32_to_fp16(scale(rng));
          std::memcpy(row + size_t(b) * size_t(info.type_size) + off, &h, 2);
        }
    }
  }
  w.m = {t, w.bytes.data(), n_in, n_out, stride};
  return w;
}

// Error bound for one output y[t][o] = Σ_i w_i x_i.
// - Quantized weights multiply int8 activations: each x_i is replaced by d*q with |x_i - d*q| <= d/2
//   and d = amax/127 over its block (32 or 256 values; we use the amax of the enclosing 256 values,
//   which is >= either), so |Δy| <= Σ_i |w_i| * amax_256(i) / 254 exactly. This is the ~1e-2
//   relative error per dot that 8-bit activations cost; the bound is rigorous, not a guess.
// - Float rounding on top: kernels accumulate in f32 over at most a few thousand terms in ≥ 4
//   partial sums, so |Δ| <= ~n/4 * 2^-24 * Σ|w_i x_i| in the worst case and ~sqrt(n) * 2^-24 in
//   practice; 2e-5 * Σ|w_i x_i| covers n up to ~1300 even in the worst case. The reference itself
//   accumulates in double and is exact to far below that.
struct Bound {
  std::vector<double> abs_dot;    // [n_tokens][n_out] Σ |w_i x_i|
  std::vector<double> act_quant;  // [n_tokens][n_out] Σ |w_i| amax_256(i) / 254
};

Bound error_bound(const WeightMatrix& w, const std::vector<float>& x, int64_t n_tokens) {
  Bound b;
  b.abs_dot.assign(size_t(n_tokens * w.n_out), 0.0);
  b.act_quant.assign(size_t(n_tokens * w.n_out), 0.0);
  std::vector<float> row(size_t(w.n_in));
  const bool quantized_acts = !is_float_type(w.type);
  for (int64_t o = 0; o < w.n_out; ++o) {
    dequantize_row_ref(w.type, static_cast<const uint8_t*>(w.data) + size_t(o) * w.row_stride,
                       row.data(), w.n_in);
    for (int64_t t = 0; t < n_tokens; ++t) {
      const float* xt = x.data() + t * w.n_in;
      double s = 0, q = 0;
      for (int64_t i0 = 0; i0 < w.n_in; i0 += 256) {
        const int64_t i1 = std::min<int64_t>(w.n_in, i0 + 256);
        double amax = 0;
        for (int64_t i = i0; i < i1; ++i) amax = std::max(amax, double(std::fabs(xt[i])));
        for (int64_t i = i0; i < i1; ++i) {
          s += std::fabs(double(row[size_t(i)]) * xt[i]);
          if (quantized_acts) q += std::fabs(double(row[size_t(i)])) * amax / 254.0;
        }
      }
      b.abs_dot[size_t(t * w.n_out + o)] = s;
      b.act_quant[size_t(t * w.n_out + o)] = q;
    }
  }
  return b;
}

ThreadPool& pool(int n_threads) {
  static std::unique_ptr<ThreadPool> pools[4];
  if (!pools[n_threads]) pools[n_threads] = std::make_unique<ThreadPool>(n_threads);
  return *pools[n_threads];
}

// Forces an ISA for the lifetime of the guard.
struct IsaGuard {
  explicit IsaGuard(Isa isa) { cpu::set_isa_override(isa); }
  ~IsaGuard() { cpu::clear_isa_override(); }
};

std::vector<Isa> available_isas() {
  return supported_isas();
}

// Shapes: n_in in units of the type's block (32 for legacy, 256 for k-quants; float types get odd
// element counts to hit the SIMD tails), n_out, n_tokens, threads.
struct Shape {
  int64_t blocks, n_out, n_tokens;
  int threads;
};
// Tokens go to the row kernels 4 at a time (AVX-512: 8; 17 = 4+4+4+4+1, 6 = 4+2), to the float tile kernels 6
// (AVX2: 3) at a time (17 = 6+6+5, 8 = 4+4, 4, 3, ...) and to the packed kernels 8 at a time: every
// width is reached.
const Shape kShapes[] = {{1, 1, 1, 1},   {3, 7, 3, 2},  {5, 37, 8, 3}, {1, 259, 17, 2},
                         {3, 259, 1, 3}, {5, 7, 17, 1}, {3, 1, 8, 2},  {1, 37, 3, 3},
                         {1, 7, 6, 2},   {5, 37, 2, 3},  {2, 13, 4, 2}, {1, 9, 5, 1}};

int64_t n_in_for(DType t, int64_t blocks, int shape_index) {
  if (is_float_type(t)) {
    const int64_t odd[] = {1, 7, 33, 100, 291, 1003, 16, 64, 15, 47, 17, 130};
    return odd[shape_index % 12] + 32 * (blocks - 1);
  }
  return blocks * dtype_info(t).block_size * (dtype_info(t).block_size == 32 ? 7 : 1);
}

// matmul(w) against matmul_ref on every ISA, within the rigorous bound of error_bound().
void expect_matches_ref(const WeightMatrix& w, const std::vector<float>& x, int64_t n_tokens, int threads) {
  std::vector<float> ref(size_t(w.n_out * n_tokens));
  matmul_ref(w, x.data(), ref.data(), n_tokens);
  const Bound bound = error_bound(w, x, n_tokens);
  for (Isa isa : available_isas()) {
    SCOPED_TRACE(cpu::isa_name(isa));
    IsaGuard guard(isa);
    std::vector<float> y(ref.size(), NAN);
    matmul(w, x.data(), y.data(), n_tokens, pool(threads));
    for (size_t i = 0; i < y.size(); ++i) {
      const double tol = 1.01 * bound.act_quant[i] + 2e-5 * bound.abs_dot[i] + 1e-30;
      ASSERT_NEAR(y[i], ref[i], tol) << "at token " << i / size_t(w.n_out) << " row " << i % size_t(w.n_out);
    }
  }
}

// The same matrix with the backend's packed copy (16-row groups; the n_out % 16 rows stay unpacked).
WeightMatrix with_packed(const WeightMatrix& w) {
  WeightMatrix p = w;
  p.packed = cpu::pack_matrix(w.type, w.data, w.n_in, w.n_out, w.row_stride);
  return p;
}

void check_against_ref(DType t, bool random_bits) {
  for (int si = 0; si < int(std::size(kShapes)); ++si) {
    const Shape& s = kShapes[si];
    const int64_t n_in = n_in_for(t, s.blocks, si);
    SCOPED_TRACE(testing::Message() << dtype_name(t) << " n_in=" << n_in << " n_out=" << s.n_out
                                    << " n_tokens=" << s.n_tokens << " threads=" << s.threads);
    const Weights w = make_weights(t, n_in, s.n_out, 1000u + uint32_t(si), random_bits);
    const auto x = test::random_floats(size_t(n_in * s.n_tokens), 77u + uint32_t(si));
    expect_matches_ref(w.m, x, s.n_tokens, s.threads);
    if (cpu::packable(t)) {
      SCOPED_TRACE("packed");
      expect_matches_ref(with_packed(w.m), x, s.n_tokens, s.threads);
    }
  }
}

// Packed layouts at group-boundary shapes: n_out below, at and around multiples of 16, every token
// count 1..17 (the group kernel takes up to 8 at a time) and 1..3 threads.
TEST(Matmul, PackedMatchesReference) {
  const int64_t n_outs[] = {15, 16, 17, 33, 48, 61};
  for (DType t : {DType::Q4_0, DType::Q8_0})
    for (bool random_bits : {false, true})
      for (int64_t n_tokens = 1; n_tokens <= 17; ++n_tokens) {
        const int64_t n_out = n_outs[size_t(n_tokens) % std::size(n_outs)];
        const int64_t n_in = 32 * (1 + n_tokens % 5);
        const int threads = 1 + int(n_tokens % 3);
        SCOPED_TRACE(testing::Message() << dtype_name(t) << " n_in=" << n_in << " n_out=" << n_out
                                        << " n_tokens=" << n_tokens << " threads=" << threads
                                        << " random_bits=" << random_bits);
        const Weights w = make_weights(t, n_in, n_out, 300u + uint32_t(n_tokens), random_bits);
        const WeightMatrix p = with_packed(w.m);
        ASSERT_EQ(p.packed != nullptr, n_out >= 16);
        const auto x = test::random_floats(size_t(n_in * n_tokens), 400u + uint32_t(n_tokens));
        expect_matches_ref(p, x, n_tokens, threads);
      }
}

// The packed group kernels multiply the same integers on every ISA: scalar and AVX-512 agree up to
// float rounding, and with the unpacked row kernels too.
TEST(Matmul, PackedAgreesWithRowKernels) {
  const int64_t n_in = 2048, n_out = 50, n_tokens = 11;
  for (DType t : {DType::Q4_0, DType::Q8_0}) {
    SCOPED_TRACE(dtype_name(t));
    const Weights w = make_weights(t, n_in, n_out, 21u, /*random_bits=*/true);
    const WeightMatrix p = with_packed(w.m);
    const auto x = test::random_floats(size_t(n_in * n_tokens), 22u);
    const Bound bound = error_bound(w.m, x, n_tokens);
    std::vector<float> y_rows(size_t(n_out * n_tokens));
    {
      IsaGuard guard(Isa::Scalar);
      matmul(w.m, x.data(), y_rows.data(), n_tokens, pool(2));
    }
    for (Isa isa : available_isas()) {
      SCOPED_TRACE(cpu::isa_name(isa));
      IsaGuard guard(isa);
      std::vector<float> y(y_rows.size());
      matmul(p, x.data(), y.data(), n_tokens, pool(3));
      for (size_t i = 0; i < y.size(); ++i)
        ASSERT_NEAR(y[i], y_rows[i], 2e-5 * (bound.abs_dot[i] + bound.act_quant[i]) + 1e-30);
    }
  }
}

// pack_for_matmul keeps the original rows; it packs exactly where this CPU has a packed kernel.
TEST(Matmul, PackForMatmulKeepsOriginal) {
  Weights w = make_weights(DType::Q4_0, 64, 32, 5u, false);
  const void* data = w.m.data;
  pack_for_matmul(w.m);
  EXPECT_EQ(w.m.data, data);
  const bool packs = isa_has_avx2(cpu::active_isa());  // AVX2 and AVX-512 have packed kernels
  EXPECT_EQ(w.m.packed != nullptr, packs);
  EXPECT_EQ(matmul_reads_original(w.m), !packs);  // 32 rows: 2 groups
  Weights w33 = make_weights(DType::Q8_0, 64, 33, 5u, false);  // one tail row stays unpacked
  pack_for_matmul(w33.m);
  EXPECT_TRUE(matmul_reads_original(w33.m));
  Weights f = make_weights(DType::F16, 64, 32, 5u, false);
  pack_for_matmul(f.m);
  EXPECT_EQ(f.m.packed, nullptr);
}

// q5_K and q6_K have no AVX-512 packed kernel: on an AVX-512 CPU with AVX-VNNI they pack for the AVX-VNNI
// kernel (pick_packed_kernel, 2026-12-05e), which then gives the bits it gives under the AVX2 ISA (the same
// kernel: AVX2 prefers its AVX-VNNI form), for 1..9 tokens.
TEST(Matmul, Q5KQ6KPackOnAvx512WithAvxVnni) {
  const auto isas = available_isas();
  if (std::find(isas.begin(), isas.end(), Isa::Avx512) == isas.end() || !cpu_features().avx_vnni)
    GTEST_SKIP() << "needs AVX-512 and AVX-VNNI";
  if (const char* e = std::getenv("POLYKV_PACKED_AVX2_ON_AVX512"); e && std::string(e) == "0")
    GTEST_SKIP() << "POLYKV_PACKED_AVX2_ON_AVX512=0";
  for (DType t : {DType::Q5_K, DType::Q6_K}) {
    SCOPED_TRACE(dtype_name(t));
    Weights w = make_weights(t, 512, 48, 77u, /*random_bits=*/true);
    {
      IsaGuard guard(Isa::Avx512);
      pack_for_matmul(w.m);
      ASSERT_NE(w.m.packed, nullptr);
      EXPECT_FALSE(matmul_reads_original(w.m));
    }
    for (int64_t n_tokens : {1, 2, 5, 8, 9}) {
      const auto x = test::random_floats(size_t(512 * n_tokens), 78u + uint32_t(n_tokens));
      std::vector<float> y512(size_t(48 * n_tokens)), y2(y512.size());
      {
        IsaGuard guard(Isa::Avx512);
        matmul(w.m, x.data(), y512.data(), n_tokens, pool(2));
      }
      {
        IsaGuard guard(Isa::Avx2);
        matmul(w.m, x.data(), y2.data(), n_tokens, pool(2));
      }
      EXPECT_EQ(std::memcmp(y512.data(), y2.data(), y512.size() * sizeof(float)), 0) << n_tokens << " tokens";
    }
  }
}

TEST(Matmul, MatchesReferenceQuantizedWeights) {
  for (DType t : kTypes) {
    if (!can_quantize(t)) continue;
    check_against_ref(t, /*random_bits=*/false);
  }
}

TEST(Matmul, MatchesReferenceRandomBlocks) {
  for (DType t : kTypes) check_against_ref(t, /*random_bits=*/true);
}

// The ISAs multiply the same quantized activations, so they differ only by float rounding:
// 2e-5 * Σ|w_i x_i| (plus the same margin on the quantization term, as x is replaced by d*q).
TEST(Matmul, IsasAgreeWithScalar) {
  const int64_t n_out = 37, n_tokens = 7;  // 4 + 3
  for (DType t : kTypes) {
    const int64_t n_in = is_float_type(t) ? 1003 : 4 * 256;
    SCOPED_TRACE(dtype_name(t));
    const Weights w = make_weights(t, n_in, n_out, 5u, /*random_bits=*/true);
    const auto x = test::random_floats(size_t(n_in * n_tokens), 6u);
    const Bound bound = error_bound(w.m, x, n_tokens);
    std::vector<float> y_scalar(size_t(n_out * n_tokens));
    {
      IsaGuard guard(Isa::Scalar);
      matmul(w.m, x.data(), y_scalar.data(), n_tokens, pool(2));
    }
    for (Isa isa : available_isas()) {
      SCOPED_TRACE(cpu::isa_name(isa));
      IsaGuard guard(isa);
      std::vector<float> y(y_scalar.size());
      matmul(w.m, x.data(), y.data(), n_tokens, pool(3));
      for (size_t i = 0; i < y.size(); ++i)
        ASSERT_NEAR(y[i], y_scalar[i], 2e-5 * (bound.abs_dot[i] + bound.act_quant[i]) + 1e-30);
    }
  }
}

// Rows of 8197 f32 activations (32 KiB) make token tiles of 8: 17 tokens take three passes.
TEST(Matmul, SeveralTokenTiles) {
  const int64_t n_in = 8197, n_out = 9, n_tokens = 17;
  const Weights w = make_weights(DType::F16, n_in, n_out, 9u, false);
  const auto x = test::random_floats(size_t(n_in * n_tokens), 10u);
  std::vector<float> ref(size_t(n_out * n_tokens)), y(ref.size());
  matmul_ref(w.m, x.data(), ref.data(), n_tokens);
  matmul(w.m, x.data(), y.data(), n_tokens, pool(2));
  const Bound bound = error_bound(w.m, x, n_tokens);
  for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], ref[i], 5e-5 * bound.abs_dot[i]);
}

// The AVX-512 activation quantizers produce the scalar ones' bytes exactly (zero blocks, ties at .5,
// values that round to ±127 included).
TEST(Matmul, AvxActQuantIsBitExact) {
  if (cpu::detected_isa() != Isa::Avx512) GTEST_SKIP() << "no AVX-512";
  const int64_t n = 4 * 256;
  const size_t nz = 4 * 256;
  auto x = test::random_floats(nz, 31u);
  for (int i = 0; i < 32; ++i) x[size_t(i)] = 0.0f;                   // an all-zero 32-block
  for (int i = 32; i < 64; ++i) x[size_t(i)] = float(i - 48) * 0.5f;  // exact .5 ties
  x[300] = 1e4f;
  std::vector<int8_t> qa(nz), qb(nz);
  std::vector<float> da(nz / 32), db(nz / 32);
  std::vector<int32_t> sa(nz / 32), sb(nz / 32);
  cpu::quantize_act_q8_32(x.data(), n, qa.data(), da.data(), sa.data());
  cpu::quantize_act_q8_32_avx512(x.data(), n, qb.data(), db.data(), sb.data());
  EXPECT_EQ(qa, qb);
  EXPECT_EQ(da, db);
  EXPECT_EQ(sa, sb);
  std::vector<int16_t> ba(nz / 16), bb(nz / 16);
  cpu::quantize_act_q8_K(x.data(), n, qa.data(), da.data(), ba.data());
  cpu::quantize_act_q8_K_avx512(x.data(), n, qb.data(), db.data(), bb.data());
  EXPECT_EQ(qa, qb);
  EXPECT_TRUE(std::equal(da.begin(), da.begin() + n / 256, db.begin()));
  EXPECT_EQ(ba, bb);
}

// Long float rows: decode (one token) has fewer than one 8-row decode tile in 7 rows, so all go
// through the row kernel; 2 tokens take one 4-row tile + 3 tail rows.
TEST(Matmul, LongFloatRowsDecode) {
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtype_name(t));
    const Weights w = make_weights(t, 4099, 7, 12u, false);
    const auto x = test::random_floats(4099 * 2, 13u);
    expect_matches_ref(w.m, x, 1, 1);
    expect_matches_ref(w.m, x, 2, 2);
  }
}

TEST(Matmul, ReportsIsa) {
  const std::string isa = matmul_isa();
  EXPECT_TRUE(isa == "avx512" || isa == "avx2" || isa == "neon" || isa == "scalar") << isa;
  EXPECT_EQ(isa, cpu::isa_name(cpu::active_isa()));
  {
    IsaGuard guard(Isa::Scalar);
    EXPECT_STREQ(matmul_isa(), "scalar");
  }
}

TEST(Matmul, RejectsBadInput) {
  std::vector<uint8_t> bytes(1024);
  std::vector<float> x(256), y(8);
  WeightMatrix q8k{DType::Q8_K, bytes.data(), 256, 1, 292};
  EXPECT_THROW(matmul(q8k, x.data(), y.data(), 1, pool(1)), Error);
  WeightMatrix ragged{DType::Q4_0, bytes.data(), 48, 1, 64};  // 48 is not a whole number of blocks
  EXPECT_THROW(matmul(ragged, x.data(), y.data(), 1, pool(1)), Error);
  WeightMatrix short_stride{DType::Q8_0, bytes.data(), 64, 2, 34};  // a row is 68 bytes
  EXPECT_THROW(matmul(short_stride, x.data(), y.data(), 1, pool(1)), Error);
}

}  // namespace
}  // namespace polykv

namespace polykv {
namespace {

// Batch invariance (issue #8): a token's output is bit-identical whatever other tokens share the call
// (alone, in the middle of a prefill tile, past a tile boundary), for every type, ISA and thread count.
// The engine relies on it: a sequence's logits must not depend on who it was batched with.
// All n_tokens tokens of x in one call (2 threads), then each range [t0, t0 + nt) on its own (1 and 3
// threads): every token's row of outputs must match byte for byte.
struct TokenRange {
  int64_t t0, nt;
};

void expect_batch_invariant(const WeightMatrix& m, const std::vector<float>& x, int64_t n_tokens,
                            const std::vector<TokenRange>& ranges) {
  const int64_t n_in = m.n_in, n_out = m.n_out;
  for (Isa isa : available_isas()) {
    SCOPED_TRACE(cpu::isa_name(isa));
    IsaGuard guard(isa);
    std::vector<float> all(size_t(n_out * n_tokens));
    matmul(m, x.data(), all.data(), n_tokens, pool(2));
    for (int threads : {1, 3})
      for (const TokenRange& r : ranges) {
        ASSERT_LE(r.t0 + r.nt, n_tokens);
        std::vector<float> part(size_t(n_out * r.nt));
        matmul(m, x.data() + r.t0 * n_in, part.data(), r.nt, pool(threads));
        EXPECT_EQ(0, std::memcmp(part.data(), all.data() + r.t0 * n_out, part.size() * sizeof(float)))
            << "tokens [" << r.t0 << ", " << r.t0 + r.nt << ") threads " << threads;
      }
  }
}

// Every type (q4_0 / q8_0 also packed), n_out around the row groups of the kernels (16 packed rows,
// 8-row decode and 4-row prefill float tiles; 7 has no packed group), call widths from 1 to past
// the row kernels' 4, the float tiles' 6 and the packed kernels' 8 tokens.
TEST(Matmul, BatchInvariant) {
  const std::vector<TokenRange> ranges = {{0, 1}, {5, 1}, {20, 1}, {0, 2}, {5, 7},
                                          {3, 8}, {11, 9}, {1, 16}, {4, 17}};
  for (DType t : kTypes)
    for (bool packed : {false, true}) {
      if (packed && !cpu::packable(t)) continue;
      const int64_t n_in = dtype_info(t).block_size == 256 ? 512 : 1024 + 64, n_tokens = 21;
      for (int64_t n_out : {37, 50, 16, 7}) {
        SCOPED_TRACE(testing::Message() << dtype_name(t) << " packed=" << packed << " n_out=" << n_out);
        const Weights w = make_weights(t, n_in, n_out, 77u, false);
        const WeightMatrix m = packed ? with_packed(w.m) : w.m;
        const auto x = test::random_floats(size_t(n_in * n_tokens), 78u);
        expect_batch_invariant(m, x, n_tokens, ranges);
      }
    }
}

// matmul_serial (the calling thread alone) gives matmul's bits on every type, packed or not, at awkward row
// counts (tails of the row groups) and token counts, against a 3-thread pool.
TEST(Matmul, SerialGivesThePoolsBits) {
  for (DType t : kTypes)
    for (bool packed : {false, true}) {
      if (packed && !cpu::packable(t)) continue;
      const int64_t n_in = dtype_info(t).block_size == 256 ? 512 : 1024 + 64;
      for (int64_t n_out : {7, 37, 50})
        for (int64_t n_tokens : {1, 3, 8, 9}) {
          SCOPED_TRACE(testing::Message() << dtype_name(t) << " packed=" << packed << " n_out=" << n_out
                                          << " n_tokens=" << n_tokens);
          const Weights w = make_weights(t, n_in, n_out, 91u, false);
          const WeightMatrix m = packed ? with_packed(w.m) : w.m;
          const auto x = test::random_floats(size_t(n_in * n_tokens), 92u);
          std::vector<float> a(size_t(n_out * n_tokens)), b(size_t(n_out * n_tokens), -1.0f);
          matmul(m, x.data(), a.data(), n_tokens, pool(3));
          matmul_serial(m, x.data(), b.data(), n_tokens);
          ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
        }
    }
}

// Wide rows, whose token tile (token_tile: the tokens whose activations fit the L2 budget) is small:
// ranges that end at, start at and straddle tile boundaries. Float rows of an odd length (masked
// tails).
TEST(Matmul, BatchInvariantAcrossTokenTiles) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q8_0, DType::Q5_1, DType::Q4_K,
                  DType::Q6_K})
    for (bool packed : {false, true}) {
      if (packed && !cpu::packable(t)) continue;
      const int64_t n_in = is_float_type(t) ? 6001 : 20480, n_out = 21;
      const int64_t tile = cpu::token_tile(t, n_in), n_tokens = 2 * tile + 3;
      SCOPED_TRACE(testing::Message() << dtype_name(t) << " packed=" << packed << " tile=" << tile);
      ASSERT_GE(tile, 8);
      ASSERT_LE(tile, 24) << "rows this wide should make small tiles";
      const Weights w = make_weights(t, n_in, n_out, 91u, false);
      const WeightMatrix m = packed ? with_packed(w.m) : w.m;
      const auto x = test::random_floats(size_t(n_in * n_tokens), 92u);
      const std::vector<TokenRange> ranges = {{tile - 1, 1}, {tile, 1},    {tile - 1, 2},       {tile - 3, 9},
                                              {0, tile + 1}, {1, tile},    {tile + 1, tile + 2}};
      expect_batch_invariant(m, x, n_tokens, ranges);
    }
}

}  // namespace
}  // namespace polykv
