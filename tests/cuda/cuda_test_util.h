// Helpers of the GPU tests: every test starts with POLYKV_REQUIRE_GPU(), which skips it cleanly on a
// machine without a GPU (CI), so the suite stays green there and runs fully on the GPU machine
// (scripts/gpu-test.sh). Plus the scaffolding the tests share: device buffers (raw, typed, or a
// backend's), upload / download / poison, and comparisons that say what is wrong (the first bad index
// with got / want, how many, NMSE) so one GPU run diagnoses a failure.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"

#define POLYKV_REQUIRE_GPU()                                  \
  do {                                                        \
    if (::polykv::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU visible"; \
  } while (0)

namespace polykv::cuda_test {

// Backend memory holding a copy of host floats (or `n` NaN floats), released with it (BackendBuf below: bytes).
struct BackendFloats {
  Backend& be;
  float* p = nullptr;
  size_t n = 0;
  BackendFloats(Backend& b, const std::vector<float>& host) : be(b), n(host.size()) {
    p = static_cast<float*>(be.allocate(n * sizeof(float)));
    be.upload(p, host.data(), n * sizeof(float));
  }
  BackendFloats(Backend& b, size_t count) : be(b), n(count) {
    p = static_cast<float*>(be.allocate(n * sizeof(float)));
    const std::vector<float> nan(n, std::nanf(""));
    be.upload(p, nan.data(), n * sizeof(float));
  }
  ~BackendFloats() { be.release(p); }
  std::vector<float> get() const {
    std::vector<float> v(n);
    be.download(v.data(), p, n * sizeof(float));
    return v;
  }
  BackendFloats(const BackendFloats&) = delete;
  BackendFloats& operator=(const BackendFloats&) = delete;
};

// A device allocation (cudaMalloc, at least 16 bytes) that frees itself.
struct DeviceBuffer {
  void* p = nullptr;
  size_t bytes = 0;
  explicit DeviceBuffer(size_t n) : bytes(n) { POLYKV_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(n, 16))); }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <class T>
  T* as() const { return static_cast<T*>(p); }
};

// bytes from host src to device dst, complete when it returns. A plain cudaMemcpy from pageable memory
// may return before its DMA has landed, and the kernels under test run on the context's non-blocking
// stream, which does not wait for the legacy stream: under load a kernel could read part of the old
// contents (seen once on the H200 with 6 test processes sharing the GPU: MatmulCuda.Matvec*).
inline void h2d(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  POLYKV_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
  POLYKV_CUDA_CHECK(cudaDeviceSynchronize());
}

// A copy of v in a new device allocation.
template <class T>
std::unique_ptr<DeviceBuffer> upload(const std::vector<T>& v) {
  auto b = std::make_unique<DeviceBuffer>(v.size() * sizeof(T));
  h2d(b->p, v.data(), v.size() * sizeof(T));
  return b;
}

// n values at d, after the work queued on `s` has finished.
template <class T>
std::vector<T> download(const T* d, size_t n, cudaStream_t s) {
  POLYKV_CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<T> v(n);
  if (n > 0) POLYKV_CUDA_CHECK(cudaMemcpy(v.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
  return v;
}

// n floats at y set to NaN (all bits set) on stream s: an output a kernel does not write shows.
inline void poison(float* y, size_t n, cudaStream_t s) {
  POLYKV_CUDA_CHECK(cudaMemsetAsync(y, 0xFF, n * sizeof(float), s));
}

// n random bytes on the device (xorshift on the host, then one copy): weights whose values a timing
// does not depend on (NaN scales included).
inline std::unique_ptr<DeviceBuffer> random_device_bytes(size_t n, uint64_t seed) {
  std::vector<uint64_t> h((n + 7) / 8);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& v : h) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    v = x;
  }
  auto b = std::make_unique<DeviceBuffer>(h.size() * 8);
  h2d(b->p, h.data(), h.size() * 8);
  return b;
}

// Median of `reps` timings of fn() on stream s (CUDA events around each call, after 3 warm-up calls),
// in seconds.
template <class Fn>
double median_seconds(cudaStream_t s, Fn&& fn, int reps) {
  for (int i = 0; i < 3; ++i) fn();
  cudaEvent_t a, b;
  POLYKV_CUDA_CHECK(cudaEventCreate(&a));
  POLYKV_CUDA_CHECK(cudaEventCreate(&b));
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    POLYKV_CUDA_CHECK(cudaEventRecord(a, s));
    fn();
    POLYKV_CUDA_CHECK(cudaEventRecord(b, s));
    POLYKV_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    POLYKV_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1e-3);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// count values of T in device memory (at least one), freed with it.
template <class T>
struct DevBuf {
  T* p = nullptr;
  size_t n = 0;
  explicit DevBuf(size_t count) : n(count) { POLYKV_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(1, n) * sizeof(T))); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  ~DevBuf() { cudaFree(p); }
  void upload(const T* src, size_t count) {
    h2d(p, src, count * sizeof(T));
  }
  void download(T* dst, size_t count) const {
    if (count > 0) POLYKV_CUDA_CHECK(cudaMemcpy(dst, p, count * sizeof(T), cudaMemcpyDeviceToHost));
  }
};

// Memory of a backend (at least 4 bytes), optionally a copy of host bytes, released with it.
struct BackendBuf {
  Backend& be;
  void* p = nullptr;
  BackendBuf(Backend& b, size_t bytes) : be(b), p(b.allocate(std::max<size_t>(bytes, 4))) {}
  BackendBuf(Backend& b, const void* host, size_t bytes) : BackendBuf(b, bytes) { b.upload(p, host, bytes); }
  ~BackendBuf() { be.release(p); }
  BackendBuf(const BackendBuf&) = delete;
  BackendBuf& operator=(const BackendBuf&) = delete;
  template <class T>
  T* as() const { return static_cast<T*>(p); }
};

// n values of a backend's memory at p.
template <class T>
std::vector<T> backend_download(Backend& be, const void* p, size_t n) {
  std::vector<T> v(n);
  be.download(v.data(), p, n * sizeof(T));
  return v;
}

// CPU logits against GPU logits, rows of n_vocab (the model tests): the worst per-row relative L2 and how many
// rows keep the CPU's top-1; every GPU logit must be finite.
struct RowCompare {
  double worst_rel = 0;  // max over rows of ||gpu - cpu|| / ||cpu||
  int top1_same = 0, rows = 0;
};

inline void compare_rows(const std::vector<float>& cpu, const std::vector<float>& gpu, int n_vocab, RowCompare& r) {
  ASSERT_EQ(cpu.size(), gpu.size());
  for (size_t row = 0; row * size_t(n_vocab) < cpu.size(); ++row) {
    const float* a = cpu.data() + row * size_t(n_vocab);
    const float* b = gpu.data() + row * size_t(n_vocab);
    double e2 = 0, r2 = 0;
    for (int i = 0; i < n_vocab; ++i) {
      ASSERT_TRUE(std::isfinite(b[i])) << "row " << row << " logit " << i << " is " << b[i];
      e2 += (double(b[i]) - a[i]) * (double(b[i]) - a[i]);
      r2 += double(a[i]) * a[i];
    }
    r.worst_rel = std::max(r.worst_rel, std::sqrt(e2 / std::max(r2, 1e-30)));
    r.top1_same += (std::max_element(a, a + n_vocab) - a) == (std::max_element(b, b + n_vocab) - b);
    ++r.rows;
  }
}

// Bit-identical (memcmp per value). On failure: how many differ, the first (with its column and row when
// row_len > 0: value i is row i % row_len of column i / row_len) and got / want.
inline ::testing::AssertionResult same_bits(const std::vector<float>& got, const std::vector<float>& want,
                                            const std::string& what, int64_t row_len = 0) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << what << ": " << got.size() << " values, want " << want.size();
  size_t n_bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], 4) != 0 && n_bad++ == 0) first = i;
  if (n_bad == 0) return ::testing::AssertionSuccess();
  ::testing::AssertionResult r = ::testing::AssertionFailure();
  r << what << ": " << n_bad << " of " << got.size() << " values differ in their bits; first at " << first;
  if (row_len > 0) r << " (column " << first / size_t(row_len) << ", row " << first % size_t(row_len) << ")";
  return r << ": got " << got[first] << ", want " << want[first];
}

// Relative L2 error of got against want (n values); INFINITY when got holds a NaN or an infinity.
inline double rel_l2(const float* got, const float* want, size_t n) {
  double e2 = 0, r2 = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    e2 += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    r2 += double(want[i]) * want[i];
  }
  return std::sqrt(e2 / std::max(r2, 1e-30));
}
inline double rel_l2(const std::vector<float>& got, const std::vector<float>& want) {
  return got.size() != want.size() ? INFINITY : rel_l2(got.data(), want.data(), want.size());
}

// NMSE of got against want over the whole array, and the first element off by more than tol_rel times
// the array's RMS (first_bad -1: none).
struct Err {
  double nmse = 0;
  int64_t first_bad = -1;
  float got = 0, want = 0;
};
inline Err compare_rms(const std::vector<float>& got, const std::vector<float>& want, double tol_rel) {
  Err e;
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) den += double(want[i]) * want[i];
  const double rms = std::sqrt(den / std::max<size_t>(want.size(), 1));
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = double(got[i]) - want[i];
    num += d * d;
    if (e.first_bad < 0 && !(std::fabs(d) <= tol_rel * rms)) {
      e.first_bad = int64_t(i);
      e.got = got[i];
      e.want = want[i];
    }
  }
  e.nmse = num / std::max(den, 1e-300);
  return e;
}

}  // namespace polykv::cuda_test
