// The arithmetic of the CUDA matmul kernels, run on the CPU (their __host__ __device__ functions,
// backend/cuda/matmul_cuda_{hd,decode,dot}.cuh): block decode of every weight type bit-exact against
// dequantize_row_ref, the scale unpacking against quant/kquant_scales.h, the activation quantization,
// and whole mat-vecs emulated lane by lane against matmul_ref (and bit-identical across the kernel
// variants for 1..8 columns: batch invariance). No GPU needed: this is the safety net of the GPU code.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/matmul.h"
#include "backend/cuda/matmul_cuda_dot.cuh"
#include "core/fp16.h"
#include "cuda/matmul_cuda_test_util.h"
#include "quant/kquant_scales.h"
#include "quant/quant.h"

namespace polykv {
namespace {

using namespace cuda::hd;
using cuda_test::make_weights;

TEST(CudaQuantDecode, HalfAndBf16MatchCpu) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float a = half_to_f32(uint16_t(h)), b = fp16_to_f32(uint16_t(h));
    ASSERT_EQ(f32_to_bits(a), f32_to_bits(b)) << "half bits " << h;
    ASSERT_EQ(f32_to_bits(cuda::hd::bf16_to_f32(uint16_t(h))), f32_to_bits(polykv::bf16_to_f32(uint16_t(h))));
  }
}

TEST(CudaQuantDecode, IntegerPrimitives) {
  std::mt19937 rng(5);
  for (int i = 0; i < 100000; ++i) {
    const uint32_t a = rng(), b = rng();
    const int32_t c = int32_t(rng() % 100000) - 50000;
    int32_t want = c;
    for (int k = 0; k < 4; ++k) want += int32_t(int8_t(a >> (8 * k))) * int32_t(int8_t(b >> (8 * k)));
    ASSERT_EQ(dp4a(a, b, c), want);
    const uint32_t nib = a & 0xF;
    uint32_t spread = 0;
    for (int k = 0; k < 4; ++k) spread |= ((nib >> k) & 1u) << (8 * k + 4);
    ASSERT_EQ(spread4_to_bit4(a), spread) << a;
  }
  for (int32_t v = -(1 << 22) + 1; v < (1 << 22); v += 7) ASSERT_EQ(i2f_exact(v), float(v)) << v;
  EXPECT_EQ(i2f_exact(520192), 520192.0f);  // the largest |Σ| of a 32-value group (32 * 128 * 127)
  EXPECT_EQ(i2f_exact(-520192), -520192.0f);
}

TEST(CudaQuantDecode, FieldAlignment) {
  EXPECT_EQ(field_align(2, 2), 2);
  EXPECT_EQ(field_align(16, 2), 2);
  EXPECT_EQ(field_align(16, 48), 16);
  EXPECT_EQ(field_align(16, 0), 16);
  EXPECT_EQ(field_align(4, 6), 2);
  EXPECT_EQ(field_align(8, 4), 4);
  EXPECT_EQ(common_alignment(4096, 2304), 16);
  EXPECT_EQ(common_alignment(4096, 18), 2);
  EXPECT_EQ(common_alignment(4098, 2304), 2);
  EXPECT_EQ(common_alignment(4100, 24), 4);
}

TEST(CudaQuantDecode, ScaleUnpackingMatchesCpu) {
  std::mt19937 rng(11);
  for (int it = 0; it < 20000; ++it) {
    uint8_t bytes[12];
    for (auto& b : bytes) b = uint8_t(rng());
    uint32_t s[3];
    std::memcpy(s, bytes, 12);
    for (int j = 0; j < 8; ++j) {
      int sc, m;
      kquant_scale_min_hd(j, s, sc, m);
      const ScaleMin want = kquant_scale_min(j, bytes);
      ASSERT_EQ(sc, want.scale);
      ASSERT_EQ(m, want.min);
    }
    for (int j = 0; j < 16; ++j) ASSERT_EQ(q3k_scale_hd(j, s), q3k_scale(j, bytes));
  }
}

// Bit-identical, except that a zero may have the other sign (ggml computes d * (q - 8), the units
// d * q - 8 * d: +0 where ggml gets -0 for a negative d; no sum or product of nonzero values changes).
bool same_value(float a, float b) { return a == 0.0f ? b == 0.0f : f32_to_bits(a) == f32_to_bits(b); }

// Decodes every unit of every block of a row with load<A> (the row placed at an address aligned to
// exactly A) and checks each value bit for bit against dequantize_row_ref, and that every value is
// decoded exactly once. A = 1 (whole-word reads of 2-byte aligned fields, matmul_cuda_hd.cuh): the
// row at 2 + `shift` bytes past a 32-byte boundary, the bytes around it readable (and poisoned).
template <class T, int A>
void check_units(const cuda_test::Weights& src, int64_t n_in, int shift = 0) {
  const size_t rb = row_bytes(src.m.type, n_in);
  // A copy of row 0 at an address that is A-aligned but not 2A-aligned (when 2A <= 16).
  std::vector<uint8_t> buf(rb + 64, 0xEE);
  uint8_t* base = buf.data() + (32 - reinterpret_cast<uintptr_t>(buf.data()) % 32) % 32;
  uint8_t* row = A == 1 ? base + 2 + shift : A < 16 ? base + A : base;
  std::memcpy(row, src.row(0), rb);
  std::vector<float> ref(static_cast<size_t>(n_in));
  dequantize_row_ref(src.m.type, row, ref.data(), n_in);
  std::vector<int> seen(size_t(n_in), 0);
  for (int64_t blk = 0; blk < n_in / T::kBlockValues; ++blk) {
    for (int part = 0; part < T::kParts; ++part) {
      typename T::Unit u;
      T::template load<A>(row + blk * T::kBlockBytes, part, u);
      for (int r = 0; r < T::kRuns; ++r) {
        float v[16];
        unit_run_values(u, r, 1.0f, v);
        const int pos0 = T::run_pos(part, r);
        ASSERT_EQ(pos0 % 16, 0);
        for (int i = 0; i < 16; ++i) {
          const int64_t idx = blk * T::kBlockValues + pos0 + i;
          ASSERT_LT(pos0 + i, T::kBlockValues);
          ++seen[size_t(idx)];
          ASSERT_TRUE(same_value(v[i], ref[size_t(idx)]))
              << dtype_name(src.m.type) << " A=" << A << " block " << blk << " part " << part << " run " << r
              << " value " << i << " (index " << idx << "): got " << v[i] << ", want " << ref[size_t(idx)];
        }
        // The embedding scale: exactly ref * mul.
        float vm[16];
        unit_run_values(u, r, 0.37f, vm);
        for (int i = 0; i < 16; ++i)
          ASSERT_TRUE(same_value(vm[i], ref[size_t(blk * T::kBlockValues + pos0 + i)] * 0.37f));
      }
    }
  }
  for (int64_t i = 0; i < n_in; ++i) ASSERT_EQ(seen[size_t(i)], 1) << dtype_name(src.m.type) << " value " << i;
}

TEST(CudaQuantDecode, UnitsMatchDequantizeRefBitExact) {
  int checked = 0;
  for (DType t : cuda_test::weight_types()) {
    visit_quant_decoder(t, [&](auto dec) {
      using T = decltype(dec);
      static_assert(T::kBlockBytes % T::kMaxAlign == 0 && T::kMaxAlign <= 16);
      EXPECT_EQ(T::kBlockValues, dtype_info(t).block_size) << dtype_name(t);
      EXPECT_EQ(T::kBlockBytes, dtype_info(t).type_size) << dtype_name(t);
      for (int seed = 0; seed < 6; ++seed) {
        const int64_t n_in = T::kBlockValues * (seed % 3 + 2);
        for (bool quantized : {false, true}) {
          SCOPED_TRACE(testing::Message() << dtype_name(t) << " seed " << seed << (quantized ? " quantized" : " random bits"));
          const auto w = make_weights(t, n_in, 1, 100u + uint32_t(seed), quantized);
          check_units<T, 2>(w, n_in);
          check_units<T, T::kMaxAlign>(w, n_in);
          check_units<T, 1>(w, n_in, 0);  // blocks at 2 mod 4 first
          check_units<T, 1>(w, n_in, 2);  // blocks at 0 mod 4 first
        }
      }
      ++checked;
    });
  }
  EXPECT_EQ(checked, 13);  // the 10 quantized types of weight_types() and the 3 ternary ones
}

TEST(CudaQuantDecode, FloatUnitsMatchDequantizeRef) {
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    visit_float_decoder(t, [&](auto dec) {
      using F = decltype(dec);
      for (int64_t n_in : {1, 3, 4, 7, 8, 9, 15, 16, 33, 100}) {
        const auto w = make_weights(t, n_in, 1, 7u + uint32_t(n_in));
        const size_t rb = row_bytes(t, n_in);
        std::vector<uint8_t> buf(rb + 64);
        uint8_t* row = buf.data() + (32 - reinterpret_cast<uintptr_t>(buf.data()) % 32) % 32;
        std::memcpy(row, w.row(0), rb);
        std::vector<float> ref(static_cast<size_t>(n_in));
        dequantize_row_ref(t, row, ref.data(), n_in);
        const int64_t n_units = (n_in + F::kValues - 1) / F::kValues;
        for (int64_t u = 0; u < n_units; ++u) {
          FUnit<F::kValues> a, b;
          load_float_unit<F, true>(row, u, n_in, a);
          load_float_unit<F, false>(row, u, n_in, b);
          for (int k = 0; k < F::kValues; ++k) {
            const int64_t i = u * F::kValues + k;
            const float want = i < n_in ? ref[size_t(i)] : 0.0f;
            ASSERT_EQ(f32_to_bits(a.w[k]), f32_to_bits(want)) << dtype_name(t) << " n_in " << n_in << " i " << i;
            ASSERT_EQ(f32_to_bits(b.w[k]), f32_to_bits(want)) << dtype_name(t) << " n_in " << n_in << " i " << i;
          }
        }
      }
    });
  }
}

TEST(CudaQuantDecode, ActivationQuantization) {
  for (int seed = 0; seed < 200; ++seed) {
    auto x = cuda_test::normal_floats(32, 900u + uint32_t(seed), seed % 2 ? 3.0f : 0.01f);
    if (seed == 7) std::fill(x.begin(), x.end(), 0.0f);
    if (seed == 9) x[5] = -1000.0f;
    int8_t q[32];
    ActScale s;
    quantize_act_block(x.data(), q, s);
    float amax = 0;
    for (float v : x) amax = std::max(amax, std::fabs(v));
    EXPECT_EQ(s.d, amax / 127.0f);
    int32_t lo = 0, hi = 0;
    for (int i = 0; i < 32; ++i) {
      ASSERT_LE(std::abs(int(q[i])), 127);
      ASSERT_LE(std::fabs(x[size_t(i)] - s.d * float(q[i])), 0.5f * s.d * (1 + 1e-5f) + 1e-30f) << i;
      (i < 16 ? lo : hi) += q[i];
    }
    EXPECT_EQ(s.s_lo, s.d * float(lo));
    EXPECT_EQ(s.s_hi, s.d * float(hi));
    EXPECT_EQ(s.s_all, s.d * float(lo + hi));
  }
}

// Whole mat-vecs emulated on the host: against the exact dot with the kernels' activations (only f32
// rounding apart), against matmul_ref within the rigorous activation-quantization bound, and bit for
// bit the same for every kernel width (1, 2, 4, 8 columns) and every column count n.
TEST(CudaQuantDecode, MatvecEmulationMatchesRefAndIsBatchInvariant) {
  struct Shape {
    int64_t n_in_blocks, n_out, n;
  };
  const Shape shapes[] = {{1, 1, 1}, {3, 7, 3}, {2, 33, 5}, {9, 5, 8}, {5, 13, 2}, {1, 3, 7}};
  int si = 0;
  for (const Shape& sh : shapes) {
    ++si;
    for (DType t : cuda_test::weight_types()) {
      const int bs = dtype_info(t).block_size;
      // Float types: odd lengths (tails inside a unit); 32-value types: 9 blocks reach lane 8 of a
      // second warp pass; k-quants: units 8 per block.
      const int64_t n_in = cuda_test::is_float_type(t) ? sh.n_in_blocks * 37 + 3 : sh.n_in_blocks * bs * (bs == 32 ? 5 : 1);
      SCOPED_TRACE(testing::Message() << dtype_name(t) << " n_in=" << n_in << " n_out=" << sh.n_out << " n=" << sh.n);
      const auto w = make_weights(t, n_in, sh.n_out, 300u + uint32_t(si), si % 2 == 0);
      const auto x = cuda_test::normal_floats(size_t(n_in * sh.n), 500u + uint32_t(si));
      const auto ref = cuda_test::reference(w.m, x, sh.n);
      std::vector<float> mref(size_t(sh.n * sh.n_out));
      matmul_ref(w.m, x.data(), mref.data(), sh.n);

      const auto y1 = cuda_test::emulate_matvec<1>(w.m, x, sh.n);
      const auto y2 = cuda_test::emulate_matvec<2>(w.m, x, sh.n);
      const auto y4 = cuda_test::emulate_matvec<4>(w.m, x, sh.n);
      const auto y8 = cuda_test::emulate_matvec<8>(w.m, x, sh.n);
      for (size_t i = 0; i < y1.size(); ++i) {
        const double tol_f32 = 2e-5 * ref.abs_dot[i] + 1e-30;
        ASSERT_NEAR(y1[i], ref.exact_q[i], tol_f32) << "output " << i;
        ASSERT_NEAR(y1[i], mref[i], 1.01 * ref.act_err[i] + tol_f32) << "output " << i;
        ASSERT_EQ(f32_to_bits(y1[i]), f32_to_bits(y2[i])) << "output " << i;
        ASSERT_EQ(f32_to_bits(y1[i]), f32_to_bits(y4[i])) << "output " << i;
        ASSERT_EQ(f32_to_bits(y1[i]), f32_to_bits(y8[i])) << "output " << i;
      }
    }
  }
}

// The stream kernel's copy plan (16-byte chunks through shared memory) decodes the same bytes in the
// same order as the direct loads: bit-identical results for every width (x loaded first or column by
// column) and rows per warp, no copy outside the row's stride, no buffer overflow; rows 16-byte
// aligned, of lengths that end mid-iteration (float rows mid-unit) and strides with padding.
TEST(CudaQuantDecode, StagedEmulationMatchesDirect) {
  int si = 0;
  for (DType t : cuda_test::weight_types()) {
    const bool fl = cuda_test::is_float_type(t);
    const int bs = fl ? 1 : dtype_info(t).block_size;
    const std::vector<int64_t> lengths = fl ? std::vector<int64_t>{3, 37, 256, 300, 2053}
                                            : std::vector<int64_t>{1, 5, 37, 64, 100};
    for (int64_t blocks : lengths) {
      const int64_t n_in = blocks * bs, n_out = 9;
      const size_t rb = row_bytes(t, n_in);
      for (size_t stride : {(rb + 15) / 16 * 16, (rb + 15) / 16 * 16 + 32}) {
        ++si;
        SCOPED_TRACE(testing::Message() << dtype_name(t) << " n_in=" << n_in << " stride=" << stride);
        auto w = make_weights(t, n_in, n_out, 700u + uint32_t(si), si % 2 == 0, stride);
        // A copy whose first row is 16-byte aligned (the staged kernel's precondition).
        std::vector<uint8_t> aligned(w.bytes.size() + 16);
        uint8_t* base = aligned.data() + (16 - reinterpret_cast<uintptr_t>(aligned.data()) % 16) % 16;
        std::memcpy(base, w.m.data, stride * size_t(n_out));
        WeightMatrix m = w.m;
        m.data = base;
        const auto x = cuda_test::normal_floats(size_t(n_in * 3), 800u + uint32_t(si));
        const auto direct = cuda_test::emulate_matvec<1>(m, x, 3);
        constexpr int kVariants = 6;
        int64_t bad[kVariants] = {};
        const std::vector<float> staged[kVariants] = {
            cuda_test::emulate_matvec_staged<1>(m, x, 3, &bad[0]),        // x first, widest R
            cuda_test::emulate_matvec_staged<1, 1, 2>(m, x, 3, &bad[1]),  // x first, R = 1, 2 units per lane
            cuda_test::emulate_matvec_staged<2, 1, 2>(m, x, 3, &bad[2]),  // x first, 2 columns
            cuda_test::emulate_matvec_staged<2>(m, x, 3, &bad[3]),
            cuda_test::emulate_matvec_staged<4>(m, x, 3, &bad[4]),        // column by column
            cuda_test::emulate_matvec_staged<8, 1, 2>(m, x, 3, &bad[5]),
        };
        for (int v = 0; v < kVariants; ++v) {
          ASSERT_EQ(bad[v], 0) << "variant " << v;
          for (size_t i = 0; i < direct.size(); ++i)
            ASSERT_EQ(f32_to_bits(direct[i]), f32_to_bits(staged[v][i])) << "variant " << v << " output " << i;
        }
      }
    }
  }
}

// The stream kernel's split of the rows over warps: contiguous ranges covering [0, n_out) once, their
// sizes differing by at most one.
TEST(CudaQuantDecode, WarpRowRangesCoverEveryRowOnce) {
  for (int64_t n_out : {int64_t(1), int64_t(7), int64_t(1000), int64_t(14336), int64_t(128256)})
    for (int64_t nw : {int64_t(1), int64_t(3), int64_t(1056), int64_t(4224), int64_t(200000)}) {
      int64_t prev_end = 0, lo = n_out, hi = 0;
      for (int64_t gw = 0; gw < nw; ++gw) {
        const int64_t b = warp_row_begin(gw, nw, n_out), e = warp_row_begin(gw + 1, nw, n_out);
        ASSERT_EQ(b, prev_end) << n_out << " rows, " << nw << " warps, warp " << gw;
        ASSERT_LE(b, e);
        lo = std::min(lo, e - b);
        hi = std::max(hi, e - b);
        prev_end = e;
      }
      EXPECT_EQ(prev_end, n_out);
      EXPECT_LE(hi - lo, 1) << n_out << " rows, " << nw << " warps";
    }
}

// A deliberately wrong decode must fail the emulation check (the test can fail): one q4_K scale byte
// changed in the weights used by the emulation but not in the reference's.
TEST(CudaQuantDecode, EmulationDetectsACorruptedScale) {
  const int64_t n_in = 512;
  auto w = make_weights(DType::Q4_K, n_in, 3, 42);
  const auto x = cuda_test::normal_floats(size_t(n_in), 43);
  const auto ref = cuda_test::reference(w.m, x, 1);
  w.bytes[w.offset + 144 + 4 + 3] ^= 0x05;  // row 0, block 1, scale byte 3
  const auto y = cuda_test::emulate_matvec<1>(w.m, x, 1);
  EXPECT_GT(std::fabs(y[0] - ref.exact_q[0]), 2e-5 * ref.abs_dot[0]);
  EXPECT_NEAR(y[1], ref.exact_q[1], 2e-5 * ref.abs_dot[1]);
}

}  // namespace
}  // namespace polykv
