// The hi/lo f16 split of the tensor-core attention (backend/cuda/half_split.cuh, __host__ __device__
// code compiled here by g++): hi + lo reproduces x to 2^-22 relative (+ f16's subnormal step) over
// the magnitudes attention sees (queries, probabilities, K/V values: 1e-4 .. 3e4), where hi alone is
// off by up to 2^-11; and the products the kernel forms (hi·hi' + hi·lo' + lo·hi') match x·y to
// 2^-20 relative plus 2^-24 (|x| + |y|) (the subnormal step of a small lo).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backend/cuda/half_split.cuh"
#include "core/fp16.h"

namespace polykv {
namespace {

float h(uint32_t bits) { return fp16_to_f32(uint16_t(bits)); }

TEST(CudaHalfSplit, HiPlusLoIsTheFloat) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> ex(-13, 14);  // up to 32768 (f16 overflows past 65504)
  double worst_split = 0, worst_hi = 0;
  for (int i = 0; i < 200000; ++i) {
    const float x = (rng() & 1 ? -1.0f : 1.0f) * std::ldexp(mant(rng), ex(rng));
    uint32_t hi, lo;
    cuda::split_half(x, hi, lo);
    const double err = std::abs(double(h(hi)) + double(h(lo)) - double(x));
    ASSERT_LE(err, std::ldexp(std::abs(double(x)), -22) + std::ldexp(1.0, -25)) << "x " << x;
    if (std::abs(x) >= 0.25f) worst_split = std::max(worst_split, err / std::abs(double(x)));  // lo normal
    worst_hi = std::max(worst_hi, std::abs(double(h(hi)) - double(x)) / std::abs(double(x)));
  }
  EXPECT_GT(worst_hi, std::ldexp(1.0, -13));  // f16 alone is far coarser: the split is what helps
  EXPECT_LT(worst_split, std::ldexp(1.0, -21));
}

TEST(CudaHalfSplit, PairsPackLowIndexFirstAndProductsAreExactEnough) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (int i = 0; i < 100000; ++i) {
    const float x = nd(rng), y = nd(rng);
    uint32_t hi, lo, h0, l0, h1, l1;
    cuda::split_pair(x, y, hi, lo);
    cuda::split_half(x, h0, l0);
    cuda::split_half(y, h1, l1);
    ASSERT_EQ(hi, h0 | (h1 << 16));
    ASSERT_EQ(lo, l0 | (l1 << 16));
    const double prod = double(h(h0)) * h(h1) + double(h(h0)) * h(l1) + double(h(l0)) * h(h1);
    // lo of a small x is an f16 subnormal (step 2^-24): an absolute error of 2^-25 per factor.
    const double bound = std::ldexp(std::abs(double(x) * y), -20) + std::ldexp(std::abs(double(x)) + std::abs(y), -24);
    ASSERT_NEAR(prod, double(x) * y, bound) << x << " * " << y;
  }
}

}  // namespace
}  // namespace polykv
