// The per-element math of the CUDA ops (backend/cuda/ops_cuda_math.cuh), run on the host exactly as
// the kernels of ops_cuda.cu map threads onto it, against the CPU ops (backend/cpu/ops.cpp). Runs in
// CI without a GPU: it checks the formulas, operation order and index mapping the kernels use; the
// GPU tests (tests/cuda/ops_cuda_test.cpp) then check the device's own rounding of them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/ops.h"
#include "backend/cuda/ops_cuda_math.cuh"

namespace polykv {
namespace {

namespace m = cuda::math;

std::vector<float> randn(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Distance in representable floats (0: same bits; +0 and -0 are 0 apart).
int64_t ulp_diff(float a, float b) {
  auto key = [](float f) {
    int32_t i;
    std::memcpy(&i, &f, 4);
    return i < 0 ? int64_t(INT32_MIN) - i : int64_t(i);
  };
  return std::llabs(key(a) - key(b));
}

// Reports the first index whose values are more than max_ulp apart.
::testing::AssertionResult within_ulp(const std::vector<float>& got, const std::vector<float>& want, int64_t max_ulp,
                                      const std::string& what) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << what << ": sizes differ";
  int64_t worst = 0;
  size_t n_bad = 0, first_bad = got.size();
  for (size_t i = 0; i < got.size(); ++i) {
    const bool both_nan = std::isnan(got[i]) && std::isnan(want[i]);
    const int64_t d = both_nan ? 0 : ulp_diff(got[i], want[i]);
    worst = std::max(worst, d);
    if (d > max_ulp) {
      if (first_bad == got.size()) first_bad = i;
      ++n_bad;
    }
  }
  if (n_bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": " << n_bad << " of " << got.size() << " values more than "
                                       << max_ulp << " ulp off (worst " << worst << "); first at " << first_bad
                                       << ": got " << got[first_bad] << ", want " << want[first_bad];
}

// rmsnorm_kernel on the host: kRmsThreads partials, the fixed tree, then the outputs.
void rmsnorm_as_kernel(const float* x, const float* w, float* out, int rows, int cols, float eps) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + int64_t(r) * cols;
    float* o = out + int64_t(r) * cols;
    double partials[m::kRmsThreads];
    for (int t = 0; t < m::kRmsThreads; ++t) partials[t] = m::rms_partial(xr, cols, t);
    for (int stride = m::kRmsThreads / 2; stride > 0; stride /= 2)
      for (int t = 0; t < m::kRmsThreads; ++t) m::rms_tree_step(partials, t, stride);
    const float inv = m::rms_inv(partials[0], cols, eps);
    for (int i = 0; i < cols; ++i) o[i] = m::rms_out(xr[i], inv, w[i]);
  }
}

TEST(CudaOpsHost, RmsnormMatchesCpuWithinOneUlp) {
  // Only the order of the double sum differs from the CPU: the float result moves by at most 1 ulp.
  for (int cols : {1, 7, 64, 255, 256, 257, 1000, 4096, 5120}) {
    const int rows = 3;
    const auto x = randn(size_t(rows) * cols, 11 + cols, 3.0f);
    const auto w = randn(size_t(cols), 99 + cols, 1.0f);
    std::vector<float> want(x.size()), got(x.size(), NAN);
    rmsnorm(x.data(), w.data(), want.data(), rows, cols, 1e-6f);
    rmsnorm_as_kernel(x.data(), w.data(), got.data(), rows, cols, 1e-6f);
    EXPECT_TRUE(within_ulp(got, want, 1, "rmsnorm cols " + std::to_string(cols)));
    // In place (out aliases x), as the backend allows.
    auto inplace = x;
    rmsnorm_as_kernel(inplace.data(), w.data(), inplace.data(), rows, cols, 1e-6f);
    EXPECT_TRUE(within_ulp(inplace, got, 0, "rmsnorm in place, cols " + std::to_string(cols)));
  }
}

TEST(CudaOpsHost, RmsnormZeroAndHugeRows) {
  // A zero row gives 0 * (1 / sqrt(eps)) = 0, never NaN. A row of +-1.5e19 (mean square 2.25e38,
  // under FLT_MAX) normalizes to +-w: its sum of squares, and each thread's share of it, would
  // overflow a float; they are in double, as on the CPU.
  const int cols = 2048;
  std::vector<float> x(size_t(2) * cols, 0.0f), w(size_t(cols), 1.5f), got(x.size()), want(x.size());
  for (int i = 0; i < cols; ++i) x[size_t(cols + i)] = i % 2 ? 1.5e19f : -1.5e19f;
  rmsnorm(x.data(), w.data(), want.data(), 2, cols, 1e-5f);
  rmsnorm_as_kernel(x.data(), w.data(), got.data(), 2, cols, 1e-5f);
  EXPECT_TRUE(within_ulp(got, want, 1, "rmsnorm zero / huge rows"));
  for (int i = 0; i < cols; ++i) {
    ASSERT_EQ(got[size_t(i)], 0.0f);
    ASSERT_NEAR(got[size_t(cols + i)], i % 2 ? 1.5f : -1.5f, 1e-5f) << i;
  }
}

// rope_kernel on the host: every flat pair index once, in any order (pairs are disjoint).
void rope_as_kernel(float* x, int rows, int n_heads, int head_dim, int n_rot, const int32_t* pos,
                    const float* inv_freq, float scale, RopeStyle style) {
  const int64_t n_pairs = int64_t(rows) * n_heads * (n_rot / 2);
  for (int64_t i = n_pairs - 1; i >= 0; --i)  // reversed: the order must not matter
    m::rope_pair(x, i, n_heads, head_dim, n_rot, pos, inv_freq, scale, style);
}

TEST(CudaOpsHost, RopeMatchesCpuBitForBit) {
  struct Case {
    int n_heads, head_dim, n_rot;
    float scale;
  };
  const Case cases[] = {{32, 128, 128, 1.0f}, {8, 128, 64, 1.0f}, {3, 80, 32, 8.0f},
                        {5, 256, 256, 0.25f}, {1, 64, 2, 1.0f},  {7, 96, 0, 1.0f}};
  for (RopeStyle style : {RopeStyle::Norm, RopeStyle::Neox})
    for (const Case& c : cases) {
      const int rows = 5;
      const std::vector<int32_t> pos = {0, 1, 4097, 131071, 77};
      std::vector<float> inv_freq(size_t(std::max(1, c.n_rot / 2)));
      for (size_t i = 0; i < inv_freq.size(); ++i)
        inv_freq[i] = 1.0f / std::pow(500000.0f, float(2 * i) / float(std::max(2, c.n_rot)));
      const auto x = randn(size_t(rows) * c.n_heads * c.head_dim, 7 + c.head_dim + c.n_rot, 1.0f);
      auto want = x, got = x;
      for (int r = 0; r < rows; ++r)
        rope(want.data() + size_t(r) * c.n_heads * c.head_dim, c.n_heads, c.head_dim, c.n_rot, pos[size_t(r)],
             inv_freq.data(), c.scale, style);
      rope_as_kernel(got.data(), rows, c.n_heads, c.head_dim, c.n_rot, pos.data(), inv_freq.data(), c.scale, style);
      const std::string what = std::string(style == RopeStyle::Norm ? "norm" : "neox") + " heads " +
                               std::to_string(c.n_heads) + " head_dim " + std::to_string(c.head_dim) + " n_rot " +
                               std::to_string(c.n_rot);
      EXPECT_TRUE(within_ulp(got, want, 0, "rope " + what));
      // Dims past n_rot are untouched.
      for (int r = 0; r < rows; ++r)
        for (int h = 0; h < c.n_heads; ++h)
          for (int d = c.n_rot; d < c.head_dim; ++d) {
            const size_t k = (size_t(r) * c.n_heads + h) * c.head_dim + d;
            ASSERT_EQ(got[k], x[k]) << what << " row " << r << " head " << h << " dim " << d;
          }
    }
}

TEST(CudaOpsHost, RopeDimsPerStyle) {
  int a = 0, b = 0;
  m::rope_dims(3, 64, RopeStyle::Norm, a, b);
  EXPECT_EQ(a, 6);
  EXPECT_EQ(b, 7);
  m::rope_dims(3, 64, RopeStyle::Neox, a, b);
  EXPECT_EQ(a, 3);
  EXPECT_EQ(b, 35);
}

TEST(CudaOpsHost, GatedActivationsMatchCpuBitForBit) {
  for (Activation act : {Activation::SiLU, Activation::GeluTanh}) {
    auto gate = randn(4099, 5, 4.0f);
    const auto up = randn(4099, 6, 2.0f);
    // Extremes: exp overflows / underflows, tanh saturates, signed zeros.
    const float extremes[] = {0.0f, -0.0f, 88.0f, -88.0f, 89.0f, -104.0f, 1e30f, -1e30f, 1e-40f, -20.0f, 20.0f};
    for (size_t i = 0; i < std::size(extremes); ++i) gate[i] = extremes[i];
    auto want = gate;
    gated_activation(want.data(), up.data(), int64_t(want.size()), act);
    std::vector<float> got(gate.size());
    for (size_t i = 0; i < gate.size(); ++i) got[i] = m::gated(gate[i], up[i], act);
    EXPECT_TRUE(within_ulp(got, want, 0, act == Activation::SiLU ? "silu" : "gelu_tanh"));
  }
}

TEST(CudaOpsHost, SoftcapMatchesCpuBitForBit) {
  for (float cap : {30.0f, 50.0f, 0.5f}) {
    auto x = randn(1031, 8, 40.0f);
    x[0] = 1e30f;
    x[1] = -1e30f;
    x[2] = 0.0f;
    auto want = x;
    softcap(want.data(), int64_t(want.size()), cap);
    std::vector<float> got(x.size());
    for (size_t i = 0; i < x.size(); ++i) got[i] = m::softcap1(x[i], cap);
    EXPECT_TRUE(within_ulp(got, want, 0, "softcap " + std::to_string(cap)));
  }
}

}  // namespace
}  // namespace polykv
