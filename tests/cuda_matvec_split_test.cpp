// The split weight layout of the CUDA mat-vec (backend/cuda/matmul_cuda_split.cuh) on the CPU (runs in
// CI): repacking is a permutation of the row's bytes (unpack(pack(row)) = row, padding zero, the
// stride the ggml one when that is a multiple of 16); every unit decodes from the split row to the same QUnit,
// bit for bit, as the ggml decoder on the original block; and the split kernel's lane arithmetic,
// emulated lane by lane (units lane, lane + 32, ... from the split rows, hd::unit_step, the warp
// butterfly), gives the same bits as the emulation of the existing kernels on the ggml rows
// (cuda/matmul_cuda_test_util.h), for 1..8 columns and 2 or 4 rows per warp, and stays within the
// rigorous bound of the 8-bit activations against dequantize_row_ref.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cuda/matmul_cuda_split.cuh"
#include "cuda/matmul_cuda_test_util.h"

namespace polykv {
namespace {

using cuda_test::make_weights;

const DType kSplitTypes[] = {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};

template <class Fn>
void with_split(DType t, Fn&& fn) {
  ASSERT_TRUE(cuda::hd::visit_split_decoder(t, fn)) << dtype_name(t);
}

std::vector<uint8_t> pack(DType t, const WeightMatrix& w, size_t* stride) {
  std::vector<uint8_t> out;
  with_split(t, [&](auto dec) {
    using T = decltype(dec);
    const auto g = cuda::hd::split_geom<T>(w.n_in);
    *stride = g.row_bytes;
    out.assign(g.row_bytes * size_t(w.n_out), 0xEE);
    cuda::hd::split_pack_rows<T>(static_cast<const uint8_t*>(w.data), w.row_stride, w.n_in, w.n_out, out.data());
  });
  return out;
}

TEST(CudaSplitLayout, RepackIsAPermutationOfEachRow) {
  uint32_t seed = 100;
  for (DType t : kSplitTypes) {
    const int64_t bs = dtype_info(t).block_size;
    for (int64_t n_in : {bs, 3 * bs, 4096 / bs * bs, 11040 / bs * bs, int64_t(14336)}) {
      if (n_in % bs) continue;
      const int64_t n_out = 5;
      const size_t rb = row_bytes(t, n_in);
      // A padded source stride too: only the row's own bytes move.
      const auto w = make_weights(t, n_in, n_out, ++seed, false, rb + 6);
      size_t stride = 0;
      const auto packed = pack(t, w.m, &stride);
      EXPECT_EQ(stride % 16, 0u) << dtype_name(t) << " n_in " << n_in;
      EXPECT_GE(stride, rb);
      EXPECT_LT(stride, rb + 16);
      if (rb % 16 == 0) {
        EXPECT_EQ(stride, rb) << dtype_name(t) << " n_in " << n_in;
      }
      std::vector<uint8_t> back(rb * size_t(n_out), 0);
      with_split(t, [&](auto dec) {
        cuda::hd::split_unpack_rows<decltype(dec)>(packed.data(), n_in, n_out, back.data(), rb);
      });
      for (int64_t o = 0; o < n_out; ++o) {
        ASSERT_EQ(std::memcmp(back.data() + size_t(o) * rb, w.row(o), rb), 0)
            << dtype_name(t) << " n_in " << n_in << " row " << o << " does not round-trip";
        for (size_t i = rb; i < stride; ++i)
          ASSERT_EQ(packed[size_t(o) * stride + i], 0) << dtype_name(t) << " padding byte " << i << " of row " << o;
      }
    }
  }
}

// Every field of every unit: the split decode of the split bytes = Dec::load of the ggml block.
TEST(CudaSplitLayout, UnitsDecodeToTheSameBits) {
  uint32_t seed = 200;
  for (DType t : kSplitTypes) {
    const int64_t n_in = 2 * dtype_info(t).block_size * 3, n_out = 3;
    for (bool quantized : {false, true}) {
      const auto w = make_weights(t, n_in, n_out, ++seed, quantized);
      size_t stride = 0;
      const auto packed = pack(t, w.m, &stride);
      with_split(t, [&](auto dec) {
        using T = decltype(dec);
        using S = cuda::hd::Split<T>;
        const auto g = cuda::hd::split_geom<T>(n_in);
        for (int64_t o = 0; o < n_out; ++o) {
          for (int64_t u = 0; u < g.n_units; ++u) {
            const int64_t blk = u / T::kParts;
            const int part = int(u % T::kParts);
            typename T::Unit want{}, got{};
            T::template load<2>(w.row(o) + blk * T::kBlockBytes, part, want);
            uint32_t q[S::kUnitWords], h[S::kHeadWords];
            cuda::hd::split_load_unit<T>(packed.data() + size_t(o) * stride, g, u, q, h);
            S::decode(q, h, part, got);
            ASSERT_EQ(std::memcmp(&want, &got, sizeof(want)), 0)
                << dtype_name(t) << " row " << o << " unit " << u << " (block " << blk << ", part " << part << ")";
          }
        }
      });
    }
  }
}

// Host emulation of matvec_split_kernel (matmul_cuda_split.cu) with R rows per warp: y [n][n_out].
template <class T, int NC, int R>
std::vector<float> emulate_split(const WeightMatrix& w, const std::vector<uint8_t>& packed, size_t stride,
                                 const cuda_test::QuantActs& a, int64_t n) {
  using S = cuda::hd::Split<T>;
  const auto g = cuda::hd::split_geom<T>(w.n_in);
  const int64_t n_steps = (g.n_units + 31) / 32, nbx = w.n_in / 32;
  std::vector<float> y(size_t(n * w.n_out), NAN);
  for (int64_t col0 = 0; col0 < n; col0 += NC) {
    const int ncols = int(std::min<int64_t>(NC, n - col0));
    for (int64_t row0 = 0; row0 < w.n_out; row0 += R) {
      const int nrows = int(std::min<int64_t>(R, w.n_out - row0));
      float lanes[32][R][NC] = {};
      for (int lane = 0; lane < 32; ++lane) {
        for (int64_t j = 0; j < n_steps; ++j) {
          const int64_t u = 32 * j + lane;
          if (u >= g.n_units) continue;
          typename T::Unit wu[R];
          for (int r = 0; r < R; ++r) {
            uint32_t q[S::kUnitWords] = {}, h[S::kHeadWords] = {};
            if (r < nrows) cuda::hd::split_load_unit<T>(packed.data() + size_t(row0 + r) * stride, g, u, q, h);
            S::decode(q, h, int(u % T::kParts), wu[r]);
          }
          cuda::hd::unit_step<T, NC, R>(wu, a.qs.data() + col0 * w.n_in, a.s.data() + col0 * nbx, w.n_in, ncols,
                                        u / T::kParts, int(u % T::kParts), lanes[lane]);
        }
      }
      for (int r = 0; r < nrows; ++r)
        for (int c = 0; c < ncols; ++c) {
          float v[32];
          for (int l = 0; l < 32; ++l) v[l] = lanes[l][r][c];
          y[size_t((col0 + c) * w.n_out + row0 + r)] = cuda::hd::warp_sum_emulated(v);
        }
    }
  }
  return y;
}

template <int NC>
void check_emulation(DType t, int64_t n_out, int64_t n_in, int64_t n, uint32_t seed) {
  const auto w = make_weights(t, n_in, n_out, seed, seed % 2 == 0);
  const auto x = cuda_test::normal_floats(size_t(n * n_in), seed + 1);
  const auto a = cuda_test::quantize_acts(x, n_in, n);
  const auto want = cuda_test::emulate_matvec<NC>(w.m, x, n);  // the existing kernels' bits
  const auto ref = cuda_test::reference(w.m, x, n);
  size_t stride = 0;
  const auto packed = pack(t, w.m, &stride);
  with_split(t, [&](auto dec) {
    using T = decltype(dec);
    for (int rows : {2, 4}) {
      const auto got = rows == 2 ? emulate_split<T, NC, 2>(w.m, packed, stride, a, n)
                                 : emulate_split<T, NC, 4>(w.m, packed, stride, a, n);
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(std::memcmp(&got[i], &want[i], 4), 0)
            << dtype_name(t) << " n_out " << n_out << " n_in " << n_in << " n " << n << " NC " << NC << " R " << rows
            << ": output " << i << " (column " << i / size_t(n_out) << ", row " << i % size_t(n_out) << ") got "
            << got[i] << ", the existing kernels give " << want[i];
        // f32 accumulation of exact per-block integer dots (the GPU tests' bound: 2e-5 of Σ |w x|).
        const double err = std::fabs(double(got[i]) - ref.exact_q[i]);
        ASSERT_LE(err, 2e-5 * ref.abs_dot[i] + 1e-6)
            << dtype_name(t) << " output " << i << " got " << got[i] << " exact " << ref.exact_q[i];
      }
    }
  });
}

TEST(CudaSplitLayout, EmulatedKernelGivesTheExistingKernelsBits) {
  uint32_t seed = 300;
  struct Shape {
    int64_t n_out, n_in;
  };
  for (DType t : kSplitTypes) {
    const bool k = dtype_info(t).block_size == 256;
    // n_in: one block; 32 units (one step); 33 units (a step of one lane); a large one.
    const Shape shapes[] = {{1, k ? 256 : 32}, {5, k ? 1024 : 1024}, {7, k ? 1280 : 1056}, {3, k ? 4352 : 4128}};
    for (const Shape& s : shapes) {
      for (int64_t n : {1, 2, 3, 5, 8}) {
        const int64_t nc = n == 1 ? 1 : n == 2 ? 2 : n <= 4 ? 4 : 8;
        ++seed;
        if (nc == 1) check_emulation<1>(t, s.n_out, s.n_in, n, seed);
        if (nc == 2) check_emulation<2>(t, s.n_out, s.n_in, n, seed);
        if (nc == 4) check_emulation<4>(t, s.n_out, s.n_in, n, seed);
        if (nc == 8) check_emulation<8>(t, s.n_out, s.n_in, n, seed);
        if (HasFatalFailure()) return;
      }
    }
  }
}

}  // namespace
}  // namespace polykv
