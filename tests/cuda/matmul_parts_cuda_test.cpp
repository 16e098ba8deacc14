// GPU tests of cuda::matmul_parts (skip without a GPU): several matrices read with one activation
// pass and one kernel launch (q, k, v; gate, up) must give every part's y bit for bit as separate
// cuda::matmul calls, for every weight type, 1..32 columns, 1..4 parts of awkward row counts (so a
// warp's rows straddle parts), padded strides and the fallback cases (rows not 16-byte aligned,
// mixed types). Outputs are poisoned first, with a guard zone that no kernel may touch.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/cuda_context.h"
#include "backend/cuda/matmul_cuda.h"
#include "backend/cuda/matmul_cuda_internal.h"
#include "cuda_test_util.h"
#include "matmul_cuda_test_util.h"
#include "ops_cuda_test.h"

namespace polykv {
namespace {

using test::DeviceFloats;

cuda::CudaContext& ctx() {
  static std::unique_ptr<cuda::CudaContext> c = std::make_unique<cuda::CudaContext>(0);
  return *c;
}

// A matrix's bytes on the device, at the host offset's alignment mod 256.
struct DeviceMatrix {
  void* buf = nullptr;
  WeightMatrix m;
  explicit DeviceMatrix(const cuda_test::Weights& w) {
    const size_t off = w.offset % 256;
    const size_t n = w.m.row_stride * size_t(w.m.n_out);
    POLYKV_CUDA_CHECK(cudaMalloc(&buf, n + 512));
    cuda_test::h2d(static_cast<uint8_t*>(buf) + off, w.bytes.data() + w.offset, n);
    m = w.m;
    m.data = static_cast<uint8_t*>(buf) + off;
  }
  ~DeviceMatrix() { cudaFree(buf); }
  DeviceMatrix(const DeviceMatrix&) = delete;
  DeviceMatrix& operator=(const DeviceMatrix&) = delete;
};

// Runs matmul_parts on the matrices and compares each part with its own cuda::matmul; returns
// whether the parts took the one-launch path.
bool check_parts(const std::vector<const DeviceMatrix*>& ms, int n, uint32_t seed, const std::string& what) {
  const int64_t n_in = ms[0]->m.n_in;
  DeviceFloats x(test::gpu_randn(size_t(n * n_in), seed));
  std::vector<std::unique_ptr<DeviceFloats>> fused, plain;
  std::vector<cuda::MatvecPart> parts;
  for (const DeviceMatrix* m : ms) {
    fused.push_back(std::make_unique<DeviceFloats>(size_t(n * m->m.n_out)));
    plain.push_back(std::make_unique<DeviceFloats>(size_t(n * m->m.n_out)));
    parts.push_back({&m->m, fused.back()->get()});
  }
  const bool together = cuda::parts_stream_together(parts);
  POLYKV_CUDA_CHECK(cudaDeviceSynchronize());  // the uploads (pageable cudaMemcpy) have landed
  cuda::matmul_parts(parts, x.get(), n, ctx());
  for (size_t i = 0; i < ms.size(); ++i) cuda::matmul(ms[i]->m, x.get(), plain[i]->get(), n, ctx());
  POLYKV_CUDA_CHECK(cudaStreamSynchronize(ctx().stream()));
  for (size_t i = 0; i < ms.size(); ++i) {
    const std::string w = what + " part " + std::to_string(i) + " (" + std::to_string(ms[i]->m.n_out) + " rows, n " +
                          std::to_string(n) + (together ? ", one launch" : ", separate") + ")";
    const auto want = plain[i]->download();
    EXPECT_TRUE(test::same_bits(fused[i]->download(), want, w));
    EXPECT_TRUE(fused[i]->guard_intact(w));
    for (size_t k = 0; k < want.size(); ++k) {
      if (std::isnan(want[k])) {
        ADD_FAILURE() << w << ": the separate matmul left value " << k << " unwritten (NaN)";
        break;
      }
    }
  }
  return together;
}

TEST(MatmulPartsCuda, EqualsSeparateCallsEveryType) {
  POLYKV_REQUIRE_GPU();
  // n_in 2048: packed rows of every type are 16-byte aligned (the one-launch path).
  const int64_t n_in = 2048;
  const std::vector<int64_t> rows = {37, 5, 130, 1};
  uint32_t seed = 100;
  for (DType t : cuda_test::weight_types()) {
    std::vector<std::unique_ptr<DeviceMatrix>> ms;
    for (int64_t r : rows) ms.push_back(std::make_unique<DeviceMatrix>(cuda_test::make_weights(t, n_in, r, ++seed)));
    for (size_t np : {size_t(1), size_t(2), size_t(3), size_t(4)}) {
      std::vector<const DeviceMatrix*> sel;
      for (size_t i = 0; i < np; ++i) sel.push_back(ms[i].get());
      for (int n : {1, 2, 3, 5, 8, 13, 32}) {
        const bool together = check_parts(sel, n, ++seed, std::string(dtype_name(t)) + " n_in 2048, " +
                                                              std::to_string(np) + " parts");
        EXPECT_TRUE(together) << dtype_name(t) << ": packed 2048-value rows should take the one-launch path";
        if (HasFailure()) return;
      }
    }
  }
}

TEST(MatmulPartsCuda, LargeShapesWideRows) {
  POLYKV_REQUIRE_GPU();
  // Rows enough for the widest rows per warp (q, k, v and gate, up of a small llama), 1 and 4 columns.
  for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::F16}) {
    for (auto shape : {std::vector<int64_t>{4096, 1024, 1024}, std::vector<int64_t>{14336, 14336}}) {
      std::vector<std::unique_ptr<DeviceMatrix>> ms;
      std::vector<const DeviceMatrix*> sel;
      uint32_t seed = 7;
      for (int64_t r : shape) {
        ms.push_back(std::make_unique<DeviceMatrix>(cuda_test::make_weights(t, 4096, r, ++seed)));
        sel.push_back(ms.back().get());
      }
      for (int n : {1, 4}) {
        EXPECT_TRUE(check_parts(sel, n, ++seed, std::string(dtype_name(t)) + " " + std::to_string(shape[0]) + "x4096"));
        if (HasFailure()) return;
      }
    }
  }
}

TEST(MatmulPartsCuda, FallbacksEqualSeparateCalls) {
  POLYKV_REQUIRE_GPU();
  // Padded stride (still 16-byte aligned: one launch), rows 2-byte aligned (separate), mixed types
  // (separate), different strides (separate).
  const auto a = DeviceMatrix(cuda_test::make_weights(DType::Q4_0, 512, 33, 1, false, 288 + 16));
  const auto b = DeviceMatrix(cuda_test::make_weights(DType::Q4_0, 512, 9, 2, false, 288 + 16));
  EXPECT_TRUE(check_parts({&a, &b}, 3, 3, "q4_0 padded stride"));
  const auto c = DeviceMatrix(cuda_test::make_weights(DType::Q4_0, 512, 21, 4, false, 0, 2));
  EXPECT_FALSE(check_parts({&a, &c}, 2, 5, "q4_0 misaligned second part"));
  const auto d = DeviceMatrix(cuda_test::make_weights(DType::Q8_0, 512, 17, 6));
  EXPECT_FALSE(check_parts({&a, &d}, 1, 7, "q4_0 + q8_0"));
  const auto e = DeviceMatrix(cuda_test::make_weights(DType::Q4_0, 512, 17, 8));
  EXPECT_FALSE(check_parts({&a, &e}, 1, 9, "two strides"));
}

}  // namespace
}  // namespace polykv
