// A probe for compute-sanitizer's initcheck (issue #9, 2026-12-01e). initcheck on
// EngineCuda.AgentsOnOnePoolInGpuMemory reported "uninitialized __global__ memory read" in rope_qk_kernel,
// reading q / k of the test's first step: the pool's 92-token prefill, whose q, k, v matmuls (> 64 rows,
// or > 32 with POLYKV_CUDA_MMQ=0) run on cuBLAS. cuBLAS's sm_90 kernels store their tiles with TMA bulk
// copies, which initcheck does not track unless asked (--check-bulk-copy yes), so it would report every
// later read of a cuBLAS output as uninitialized. This test is that situation alone: the backend's
// prefill matmul (f16 weights, 92 rows: cublasGemmEx) writes y, a plain kernel (add) reads it; a control
// buffer written by a plain kernel is read the same way. Under
//   compute-sanitizer --tool initcheck polykv_tests --gtest_filter='CudaInitcheckProbe.*'
// reports in add_kernel on y and none on the control mean the rope reports are that artifact; with
// --check-bulk-copy yes they should go away. Without the sanitizer it checks y against the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/matmul.h"
#include "core/fp16.h"
#include "cuda_test_util.h"

namespace polykv {
namespace {

TEST(CudaInitcheckProbe, CublasOutputFeedsAKernel) {
  POLYKV_REQUIRE_GPU();
  auto be = make_backend({"cuda", 0});
  const int n_in = 512, n_out = 512, n = 92;
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<uint16_t> wh(size_t(n_in) * n_out);
  for (auto& h : wh) h = f32_to_fp16(0.05f * d(rng));
  std::vector<float> x(size_t(n) * n_in);
  for (auto& v : x) v = d(rng);
  WeightMatrix hw;
  hw.type = DType::F16;
  hw.data = wh.data();
  hw.n_in = n_in;
  hw.n_out = n_out;
  hw.row_stride = size_t(n_in) * 2;
  const WeightMatrix dw = be->upload_matrix(hw);
  const size_t ny = size_t(n) * n_out;
  float* dx = static_cast<float*>(be->allocate(x.size() * 4));
  float* dy = static_cast<float*>(be->allocate(ny * 4));
  float* acc = static_cast<float*>(be->allocate(ny * 4));
  float* ctl = static_cast<float*>(be->allocate(ny * 4));
  be->upload(dx, x.data(), x.size() * 4);
  const std::vector<float> zeros(ny, 0.0f);
  be->upload(acc, zeros.data(), ny * 4);
  be->upload(ctl, zeros.data(), ny * 4);
  be->matmul(dw, dx, dy, n);  // 92 rows of f16 weights: cuBLAS writes dy
  be->add(ctl, acc, int64_t(ny));  // control: ctl written by a plain kernel...
  be->add(acc, ctl, int64_t(ny));  // ...and read by one
  be->add(acc, dy, int64_t(ny));   // the probe: a plain kernel reads cuBLAS's output
  std::vector<float> got(ny), want(ny);
  be->download(got.data(), acc, ny * 4);
  matmul_ref(hw, x.data(), want.data(), n);
  double num = 0, den = 0;
  for (size_t i = 0; i < ny; ++i) {
    num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    den += double(want[i]) * want[i];
  }
  EXPECT_LT(num / den, 1e-5) << "x rounded to f16: NMSE ~1e-7 expected";
  for (float* p : {dx, dy, acc, ctl}) be->release(p);
}

}  // namespace
}  // namespace polykv
