// Helpers of the GPU op tests (ops_cuda_test.cpp, cuda_backend_test.cpp): device buffers with a
// poisoned guard zone after them, and comparisons that say precisely what is wrong (the op, the
// sizes, the first bad index with got / want, the worst error, NMSE) so one GPU run diagnoses it.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "cuda_test_util.h"

namespace polykv::test {

// Floats in device memory, followed by kGuard poisoned floats that no kernel may touch.
class DeviceFloats {
 public:
  static constexpr size_t kGuard = 64;
  static constexpr uint32_t kPoison = 0x7fc0dead;  // a quiet NaN with a recognizable payload

  explicit DeviceFloats(size_t n) : n_(n) {
    POLYKV_CUDA_CHECK(cudaMalloc(&p_, (n + kGuard) * sizeof(float)));
    poison();
  }
  DeviceFloats(const std::vector<float>& host) : DeviceFloats(host.size()) { upload(host); }
  ~DeviceFloats() { cudaFree(p_); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;

  float* get() { return p_; }
  size_t size() const { return n_; }
  // Every value and the guard zone set to the poison NaN.
  void poison() {
    const std::vector<uint32_t> bits(n_ + kGuard, kPoison);
    cuda_test::h2d(p_, bits.data(), bits.size() * 4);
  }
  void upload(const std::vector<float>& host) {
    cuda_test::h2d(p_, host.data(), n_ * sizeof(float));
  }
  std::vector<float> download() const {
    POLYKV_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> v(n_);
    POLYKV_CUDA_CHECK(cudaMemcpy(v.data(), p_, n_ * sizeof(float), cudaMemcpyDeviceToHost));
    return v;
  }
  // Success unless a kernel wrote past the end.
  ::testing::AssertionResult guard_intact(const std::string& what) const {
    POLYKV_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<uint32_t> g(kGuard);
    POLYKV_CUDA_CHECK(cudaMemcpy(g.data(), p_ + n_, kGuard * 4, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < kGuard; ++i)
      if (g[i] != kPoison)
        return ::testing::AssertionFailure() << what << ": wrote past the end of its " << n_ << " floats (guard "
                                             << i << " is 0x" << std::hex << g[i] << ")";
    return ::testing::AssertionSuccess();
  }

 private:
  size_t n_;
  float* p_ = nullptr;
};

// int32 values in device memory.
class DeviceInts {
 public:
  explicit DeviceInts(const std::vector<int32_t>& host) : n_(host.size()) {
    POLYKV_CUDA_CHECK(cudaMalloc(&p_, std::max<size_t>(1, n_) * 4));
    if (n_) cuda_test::h2d(p_, host.data(), n_ * 4);
  }
  ~DeviceInts() { cudaFree(p_); }
  DeviceInts(const DeviceInts&) = delete;
  DeviceInts& operator=(const DeviceInts&) = delete;
  int32_t* get() { return p_; }

 private:
  size_t n_;
  int32_t* p_ = nullptr;
};

inline std::vector<float> gpu_randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Compares got with want element by element: |got - want| <= abs_tol + rel_tol * |want| (tol[i] adds a
// per-element allowance when given). NaN never passes (an unwritten poisoned value shows up here).
// The failure names the first bad index, counts the bad ones and gives the worst error and NMSE.
inline ::testing::AssertionResult close_to(const std::vector<float>& got, const std::vector<float>& want,
                                           double abs_tol, double rel_tol, const std::string& what,
                                           const std::vector<float>* tol = nullptr) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << what << ": " << got.size() << " values, want " << want.size();
  size_t n_bad = 0, first = got.size(), worst_i = 0;
  double worst = 0, err2 = 0, ref2 = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    const double d = std::fabs(g - w);
    const double allowed = abs_tol + rel_tol * std::fabs(w) + (tol ? double((*tol)[i]) : 0.0);
    const bool bad = !(d <= allowed) || std::isnan(g) != std::isnan(w);
    if (std::isfinite(d)) {
      err2 += d * d;
      ref2 += w * w;
    }
    if (bad) {
      if (first == got.size()) first = i;
      ++n_bad;
    }
    if (!(d <= worst)) {
      worst = d;
      worst_i = i;
    }
  }
  if (n_bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": " << n_bad << " of " << got.size() << " values off; first at "
                                       << first << ": got " << got[first] << ", want " << want[first]
                                       << "; worst at " << worst_i << ": got " << got[worst_i] << ", want "
                                       << want[worst_i] << "; NMSE " << (ref2 > 0 ? err2 / ref2 : err2)
                                       << " (abs_tol " << abs_tol << ", rel_tol " << rel_tol << ")";
}

// Bit-identical (memcmp per value), with the same diagnostics (cuda_test_util.h).
inline ::testing::AssertionResult same_bits(const std::vector<float>& got, const std::vector<float>& want,
                                            const std::string& what) {
  return cuda_test::same_bits(got, want, what);
}

// Floats apart in representation (0: same bits; +0 and -0 are 0 apart); NaNs compare as far.
inline int64_t ulp_distance(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return INT64_MAX;
  auto key = [](float f) {
    int32_t i;
    std::memcpy(&i, &f, 4);
    return i < 0 ? int64_t(INT32_MIN) - i : int64_t(i);
  };
  return std::llabs(key(a) - key(b));
}

inline ::testing::AssertionResult within_ulps(const std::vector<float>& got, const std::vector<float>& want,
                                              int64_t max_ulp, const std::string& what) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << what << ": " << got.size() << " values, want " << want.size();
  size_t n_bad = 0, first = 0, n_exact = 0;
  int64_t worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const int64_t d = ulp_distance(got[i], want[i]);
    n_exact += d == 0;
    if (d > worst) worst = d;
    if (d > max_ulp && n_bad++ == 0) first = i;
  }
  if (n_bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": " << n_bad << " of " << got.size() << " values more than "
                                       << max_ulp << " ulp off (worst " << worst << ", " << n_exact
                                       << " exact); first at " << first << ": got " << got[first] << ", want "
                                       << want[first];
}

}  // namespace polykv::test
