// The element-wise and normalization kernels of backend/cuda/ops_cuda.h on the GPU against the CPU
// ops (backend/cpu/ops.cpp), on awkward sizes, with poisoned outputs and guard zones. Bounds:
//   add, add_bias, gather_rows: the CPU's bits;
//   rmsnorm: within 1 ulp (only the order of its double sum differs; almost always the same bits);
//   rope: |err| <= 1e-6 * (|x_a| + |x_b|) of the pair (CUDA's sinf/cosf are within 2 ulp, ~2.4e-7);
//   SiLU / GELU-tanh / softcap: |err| <= 1e-6 |want| + 3e-7 |g u| (expf/tanhf within 2 ulp; GELU's
//   1 + tanh cancels for large negative g, which the |g u| term allows).
// Also: every op gives a row the same bits whether it is alone or in a batch (backend.h's rule).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "backend/cpu/ops.h"
#include "backend/cuda/ops_cuda.h"
#include "core/argmax_ref.h"
#include "cuda_test_util.h"
#include "ops_cuda_test.h"

namespace polykv {
namespace {

using test::close_to;
using test::DeviceFloats;
using test::DeviceInts;
using test::gpu_randn;
using test::same_bits;
using test::within_ulps;

constexpr cudaStream_t kStream = nullptr;  // the legacy default stream; DeviceFloats::download syncs

std::string sizes(int rows, int cols) { return "rows " + std::to_string(rows) + " cols " + std::to_string(cols); }

TEST(OpsCuda, RmsnormMatchesCpu) {
  POLYKV_REQUIRE_GPU();
  // Rows per block are one; cols below, at and past the 256 threads of a block, odd, and large.
  const int shapes[][2] = {{1, 1}, {3, 7}, {17, 255}, {2, 256}, {5, 257}, {1, 4096}, {33, 5120}, {4099, 128},
                           {2, 16387}};
  for (const auto& s : shapes) {
    const int rows = s[0], cols = s[1];
    const auto x = gpu_randn(size_t(rows) * cols, 1 + rows * 7 + cols, 2.5f);
    const auto w = gpu_randn(size_t(cols), 2 + cols, 1.0f);
    std::vector<float> want(x.size());
    rmsnorm(x.data(), w.data(), want.data(), rows, cols, 1e-5f);

    DeviceFloats dx(x), dw(w), dout(x.size());
    cuda::rmsnorm(dx.get(), dw.get(), dout.get(), rows, cols, 1e-5f, kStream);
    EXPECT_TRUE(within_ulps(dout.download(), want, 1, "rmsnorm " + sizes(rows, cols)));
    EXPECT_TRUE(dout.guard_intact("rmsnorm out " + sizes(rows, cols)));
    EXPECT_TRUE(same_bits(dx.download(), x, "rmsnorm input (must be unchanged) " + sizes(rows, cols)));

    // In place: out aliases x.
    cuda::rmsnorm(dx.get(), dw.get(), dx.get(), rows, cols, 1e-5f, kStream);
    EXPECT_TRUE(same_bits(dx.download(), dout.download(), "rmsnorm in place vs out of place " + sizes(rows, cols)));
    EXPECT_TRUE(dx.guard_intact("rmsnorm in place " + sizes(rows, cols)));
  }
}

TEST(OpsCuda, RmsnormRowIsBatchInvariant) {
  POLYKV_REQUIRE_GPU();
  const int rows = 37, cols = 4096;
  const auto x = gpu_randn(size_t(rows) * cols, 3, 1.0f);
  const auto w = gpu_randn(size_t(cols), 4, 1.0f);
  DeviceFloats dx(x), dw(w), all(x.size());
  cuda::rmsnorm(dx.get(), dw.get(), all.get(), rows, cols, 1e-6f, kStream);
  const auto batched = all.download();
  for (int r : {0, 18, 36}) {
    DeviceFloats one(static_cast<size_t>(cols));
    cuda::rmsnorm(dx.get() + size_t(r) * cols, dw.get(), one.get(), 1, cols, 1e-6f, kStream);
    const std::vector<float> in_batch(batched.begin() + size_t(r) * cols, batched.begin() + size_t(r + 1) * cols);
    EXPECT_TRUE(same_bits(one.download(), in_batch, "rmsnorm row " + std::to_string(r) + " alone vs in a batch"));
  }
}

TEST(OpsCuda, AddAndAddBiasAreExact) {
  POLYKV_REQUIRE_GPU();
  // Past 2^16 blocks of 256 threads, so the grid-stride loop wraps.
  for (int64_t n : {int64_t(1), int64_t(1000003), int64_t(17) * 1000 * 1000 + 11}) {
    const auto x = gpu_randn(size_t(n), 5, 3.0f), y = gpu_randn(size_t(n), 6, 3.0f);
    auto want = x;
    add_inplace(want.data(), y.data(), n);
    DeviceFloats dx(x), dy(y);
    cuda::add(dx.get(), dy.get(), n, kStream);
    EXPECT_TRUE(same_bits(dx.download(), want, "add n " + std::to_string(n)));
    EXPECT_TRUE(dx.guard_intact("add n " + std::to_string(n)));
  }
  const int shapes[][2] = {{1, 1}, {3, 5}, {7, 4099}, {513, 896}};
  for (const auto& s : shapes) {
    const int rows = s[0], cols = s[1];
    const auto x = gpu_randn(size_t(rows) * cols, 7, 3.0f), b = gpu_randn(size_t(cols), 8, 1.0f);
    auto want = x;
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) want[size_t(r) * cols + c] += b[size_t(c)];
    DeviceFloats dx(x), db(b);
    cuda::add_bias(dx.get(), db.get(), rows, cols, kStream);
    EXPECT_TRUE(same_bits(dx.download(), want, "add_bias " + sizes(rows, cols)));
    EXPECT_TRUE(dx.guard_intact("add_bias " + sizes(rows, cols)));
  }
}

TEST(OpsCuda, RopeMatchesCpuPerRowPositions) {
  POLYKV_REQUIRE_GPU();
  struct Case {
    int rows, n_heads, head_dim, n_rot;
    float scale;
  };
  const Case cases[] = {{1, 32, 128, 128, 1.0f}, {7, 8, 128, 64, 1.0f}, {5, 3, 80, 32, 8.0f},
                        {3, 5, 256, 256, 0.25f}, {2, 1, 64, 2, 1.0f},  {129, 4, 64, 64, 1.0f},
                        {2, 2, 512, 512, 1.0f}};
  for (RopeStyle style : {RopeStyle::Norm, RopeStyle::Neox})
    for (const Case& c : cases) {
      std::vector<int32_t> pos(size_t(c.rows));
      for (int r = 0; r < c.rows; ++r) pos[size_t(r)] = int32_t((r * 104729 + 3) % 131072);  // spread, incl. large
      pos[0] = 0;
      std::vector<float> inv_freq(size_t(c.n_rot / 2));
      for (size_t i = 0; i < inv_freq.size(); ++i)
        inv_freq[i] = 1.0f / std::pow(500000.0f, float(2 * i) / float(c.n_rot));
      const size_t row = size_t(c.n_heads) * c.head_dim;
      const auto x = gpu_randn(size_t(c.rows) * row, 9 + c.head_dim + c.n_rot, 1.0f);
      auto want = x;
      for (int r = 0; r < c.rows; ++r)
        rope(want.data() + size_t(r) * row, c.n_heads, c.head_dim, c.n_rot, pos[size_t(r)], inv_freq.data(), c.scale,
             style);
      // Per element: 1e-6 of the magnitude of the pair it belongs to (taken before rotation).
      std::vector<float> tol(x.size(), 0.0f);
      for (size_t h = 0; h < size_t(c.rows) * c.n_heads; ++h)
        for (int i = 0; i < c.n_rot / 2; ++i) {
          const int a = style == RopeStyle::Norm ? 2 * i : i;
          const int b = style == RopeStyle::Norm ? 2 * i + 1 : i + c.n_rot / 2;
          const float m = 1e-6f * (std::fabs(x[h * c.head_dim + a]) + std::fabs(x[h * c.head_dim + b]));
          tol[h * c.head_dim + a] = tol[h * c.head_dim + b] = m;
        }
      DeviceFloats dx(x), df(inv_freq);
      DeviceInts dpos(pos);
      cuda::rope(dx.get(), c.rows, c.n_heads, c.head_dim, c.n_rot, dpos.get(), df.get(), c.scale, style, kStream);
      const std::string what = std::string("rope ") + (style == RopeStyle::Norm ? "norm" : "neox") + " rows " +
                               std::to_string(c.rows) + " heads " + std::to_string(c.n_heads) + " head_dim " +
                               std::to_string(c.head_dim) + " n_rot " + std::to_string(c.n_rot) + " scale " +
                               std::to_string(c.scale);
      const auto got = dx.download();
      EXPECT_TRUE(close_to(got, want, 0.0, 0.0, what, &tol));
      EXPECT_TRUE(dx.guard_intact(what));
      // Dims past n_rot keep their bits.
      for (size_t h = 0; h < size_t(c.rows) * c.n_heads; ++h)
        for (int d = c.n_rot; d < c.head_dim; ++d)
          ASSERT_EQ(got[h * c.head_dim + d], x[h * c.head_dim + d]) << what << ": head " << h << " dim " << d;
    }
}

TEST(OpsCuda, RopeRowIsBatchInvariant) {
  POLYKV_REQUIRE_GPU();
  const int rows = 9, n_heads = 8, head_dim = 128;
  std::vector<int32_t> pos(rows);
  std::iota(pos.begin(), pos.end(), 1000);
  std::vector<float> inv_freq(64);
  for (size_t i = 0; i < 64; ++i) inv_freq[i] = 1.0f / std::pow(10000.0f, float(2 * i) / 128.0f);
  const auto x = gpu_randn(size_t(rows) * n_heads * head_dim, 10);
  DeviceFloats all(x), df(inv_freq);
  DeviceInts dpos(pos);
  cuda::rope(all.get(), rows, n_heads, head_dim, head_dim, dpos.get(), df.get(), 1.0f, RopeStyle::Neox, kStream);
  const auto batched = all.download();
  const size_t row = size_t(n_heads) * head_dim;
  const int r = 5;
  DeviceFloats one(std::vector<float>(x.begin() + r * row, x.begin() + (r + 1) * row));
  cuda::rope(one.get(), 1, n_heads, head_dim, head_dim, dpos.get() + r, df.get(), 1.0f, RopeStyle::Neox, kStream);
  EXPECT_TRUE(same_bits(one.download(), std::vector<float>(batched.begin() + r * row, batched.begin() + (r + 1) * row),
                        "rope row alone vs in a batch"));
}

TEST(OpsCuda, GatedActivationMatchesCpu) {
  POLYKV_REQUIRE_GPU();
  for (Activation act : {Activation::SiLU, Activation::GeluTanh})
    for (int64_t n : {int64_t(1), int64_t(14336) * 3 + 5, int64_t(17) * 1000 * 1000 + 3}) {
      auto gate = gpu_randn(size_t(n), 11, 4.0f);
      const auto up = gpu_randn(size_t(n), 12, 2.0f);
      const float extremes[] = {0.0f, -0.0f, 88.0f, -88.0f, 89.0f, -104.0f, 1e30f, -1e30f, -20.0f, 20.0f, -9.0f};
      for (size_t i = 0; i < std::size(extremes) && i < gate.size(); ++i) gate[i] = extremes[i];
      auto want = gate;
      gated_activation(want.data(), up.data(), n, act);
      std::vector<float> tol(static_cast<size_t>(n));
      for (size_t i = 0; i < tol.size(); ++i) tol[i] = 3e-7f * std::fabs(gate[i] * up[i]);
      DeviceFloats dg(gate), du(up);
      cuda::gated_activation(dg.get(), du.get(), n, act, kStream);
      const std::string what = std::string(act == Activation::SiLU ? "silu" : "gelu_tanh") + " n " + std::to_string(n);
      EXPECT_TRUE(close_to(dg.download(), want, 0.0, 1e-6, what, &tol));
      EXPECT_TRUE(dg.guard_intact(what));
    }
}

TEST(OpsCuda, SoftcapMatchesCpu) {
  POLYKV_REQUIRE_GPU();
  for (float cap : {30.0f, 50.0f, 0.5f}) {
    auto x = gpu_randn(262147, 13, 40.0f);
    x[0] = 1e30f;
    x[1] = -1e30f;
    x[2] = 0.0f;
    x[3] = 1e-30f;
    auto want = x;
    softcap(want.data(), int64_t(want.size()), cap);
    DeviceFloats dx(x);
    cuda::softcap(dx.get(), int64_t(x.size()), cap, kStream);
    EXPECT_TRUE(close_to(dx.download(), want, 1e-37, 1e-6, "softcap cap " + std::to_string(cap)));
    EXPECT_TRUE(dx.guard_intact("softcap"));
  }
}

TEST(OpsCuda, GatherRowsIsExact) {
  POLYKV_REQUIRE_GPU();
  const int src_rows = 101;
  for (int cols : {1, 7, 4096, 4099}) {
    const auto src = gpu_randn(size_t(src_rows) * cols, 14 + cols);
    const std::vector<int32_t> rows = {100, 0, 5, 5, 99, 17, 100};  // repeats, first and last row, any order
    std::vector<float> want;
    for (int32_t r : rows) want.insert(want.end(), src.begin() + size_t(r) * cols, src.begin() + size_t(r + 1) * cols);
    DeviceFloats dsrc(src), ddst(want.size());
    DeviceInts drows(rows);
    cuda::gather_rows(dsrc.get(), drows.get(), int(rows.size()), cols, ddst.get(), kStream);
    EXPECT_TRUE(same_bits(ddst.download(), want, "gather_rows cols " + std::to_string(cols)));
    EXPECT_TRUE(ddst.guard_intact("gather_rows cols " + std::to_string(cols)));
  }
}

// argmax_rows against core/argmax_ref.h on rows of every awkward kind (random, ties, NaN, +-inf, all
// unusable), short and vocabulary-sized, several per launch (one block per row).
TEST(OpsCuda, ArgmaxRowsMatchTheReference) {
  POLYKV_REQUIRE_GPU();
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (int cols : {1, 7, 33, 513, 4177, 128256}) {
    std::vector<float> x = gpu_randn(size_t(cols) * 8, 40 + cols);
    float* r = x.data();
    const size_t c = size_t(cols);
    for (size_t i = 0; i < c; ++i) r[c + i] = float(int(i % 13));  // row 1: ties (many maxima of 12)
    for (size_t i = 0; i < c; i += 3) r[2 * c + i] = nan;          // row 2: NaN sprinkled, first included
    std::fill(r + 3 * c, r + 4 * c, nan);                          // row 3: all NaN: -1
    std::fill(r + 4 * c, r + 5 * c, -inf);                         // row 4: all -inf, one finite at the end
    r[5 * c - 1] = -1e30f;
    r[5 * c + c / 2] = inf;                                        // row 5: +inf twice, the first wins
    r[6 * c - 1] = inf;
    std::fill(r + 6 * c, r + 7 * c, 2.5f);                         // row 6: all equal: 0
    std::vector<int32_t> want(8);
    for (int i = 0; i < 8; ++i) want[size_t(i)] = argmax_first_ref(r + size_t(i) * c, cols);
    DeviceFloats dx(x);
    int32_t* dout = nullptr;
    POLYKV_CUDA_CHECK(cudaMalloc(&dout, 8 * sizeof(int32_t)));
    POLYKV_CUDA_CHECK(cudaMemset(dout, 0x7f, 8 * sizeof(int32_t)));
    cuda::argmax_rows(dx.get(), 8, cols, dout, kStream);
    std::vector<int32_t> got(8);
    POLYKV_CUDA_CHECK(cudaMemcpy(got.data(), dout, 8 * sizeof(int32_t), cudaMemcpyDeviceToHost));
    POLYKV_CUDA_CHECK(cudaFree(dout));
    EXPECT_EQ(got, want) << "cols " << cols;
  }
}

TEST(OpsCuda, ZeroSizesLaunchNothing) {
  POLYKV_REQUIRE_GPU();
  DeviceFloats x(static_cast<size_t>(0));
  cuda::rmsnorm(x.get(), x.get(), x.get(), 0, 128, 1e-5f, kStream);
  cuda::add(x.get(), x.get(), 0, kStream);
  cuda::add_bias(x.get(), x.get(), 0, 64, kStream);
  cuda::rope(x.get(), 0, 8, 128, 128, nullptr, nullptr, 1.0f, RopeStyle::Norm, kStream);
  cuda::gated_activation(x.get(), x.get(), 0, Activation::SiLU, kStream);
  cuda::softcap(x.get(), 0, 30.0f, kStream);
  cuda::gather_rows(x.get(), nullptr, 0, 64, x.get(), kStream);
  cuda::argmax_rows(x.get(), 0, 64, nullptr, kStream);
  POLYKV_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_TRUE(x.guard_intact("zero-size ops"));
}

}  // namespace
}  // namespace polykv
