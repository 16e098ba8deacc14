// The device path of split_pair (backend/cuda/half_split.cuh: paired cvt.rn.f16x2 conversions on the
// GPU, two split_half calls on the host) gives the same bits as the host path the CPU tests check
// (tests/cuda_half_split_test.cpp): random floats over the magnitudes attention sees, f16
// subnormals, zeros, values near f16's overflow. On failure: the first differing pair, both results.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/half_split.cuh"
#include "cuda_test_util.h"

namespace polykv {
namespace {

__global__ void split_pairs_kernel(const float* x, int n, uint32_t* hi, uint32_t* lo) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) cuda::split_pair(x[2 * i], x[2 * i + 1], hi[i], lo[i]);
}

TEST(CudaHalfSplitDevice, SplitPairMatchesTheHostBits) {
  POLYKV_REQUIRE_GPU();
  std::mt19937 rng(23);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> ex(-30, 14);  // f16 subnormals (< 2^-14) up to 32768
  std::vector<float> x;
  for (int i = 0; i < 200000; ++i) x.push_back((rng() & 1 ? -1.0f : 1.0f) * std::ldexp(mant(rng), ex(rng)));
  for (float v : {0.0f, -0.0f, 1.0f, 65504.0f, -65504.0f, 6.1e-5f, 5.96e-8f, 1.0f / 3.0f}) x.push_back(v);
  if (x.size() % 2) x.push_back(0.5f);
  const int n = int(x.size() / 2);
  float* dx = nullptr;
  uint32_t *dh = nullptr, *dl = nullptr;
  POLYKV_CUDA_CHECK(cudaMalloc(&dx, x.size() * sizeof(float)));
  POLYKV_CUDA_CHECK(cudaMalloc(&dh, size_t(n) * sizeof(uint32_t)));
  POLYKV_CUDA_CHECK(cudaMalloc(&dl, size_t(n) * sizeof(uint32_t)));
  POLYKV_CUDA_CHECK(cudaMemcpy(dx, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice));
  split_pairs_kernel<<<(n + 255) / 256, 256>>>(dx, n, dh, dl);
  POLYKV_CUDA_CHECK(cudaGetLastError());
  std::vector<uint32_t> gh(n), gl(n);
  POLYKV_CUDA_CHECK(cudaMemcpy(gh.data(), dh, size_t(n) * sizeof(uint32_t), cudaMemcpyDeviceToHost));
  POLYKV_CUDA_CHECK(cudaMemcpy(gl.data(), dl, size_t(n) * sizeof(uint32_t), cudaMemcpyDeviceToHost));
  cudaFree(dx);
  cudaFree(dh);
  cudaFree(dl);
  int bad = 0;
  for (int i = 0; i < n; ++i) {
    uint32_t hi, lo;
    cuda::split_pair(x[2 * i], x[2 * i + 1], hi, lo);
    if ((hi != gh[i] || lo != gl[i]) && bad++ == 0)
      ADD_FAILURE() << "pair " << i << " (" << x[2 * i] << ", " << x[2 * i + 1] << "): device hi " << std::hex << gh[i]
                    << " lo " << gl[i] << ", host hi " << hi << " lo " << lo;
  }
  EXPECT_EQ(bad, 0) << "of " << n << " pairs";
}

}  // namespace
}  // namespace polykv
