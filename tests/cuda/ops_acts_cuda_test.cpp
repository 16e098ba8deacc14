// GPU tests of the ops that also write the next mat-vec's 8-bit activations (ops_cuda_acts.h; skip
// without a GPU): their float outputs must be the plain ops' bits (rmsnorm, add + rmsnorm, gated
// activation) and their activations the bytes prepare_acts writes for those outputs; matmul on them
// (matmul_prepared, matmul_parts_prepared) must give cuda::matmul's bits. Awkward row counts, out
// aliasing the input, with and without programmatic dependent launch, guard zones after every buffer.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/cuda_context.h"
#include "backend/cuda/matmul_cuda.h"
#include "backend/cuda/matmul_cuda_internal.h"
#include "backend/cuda/matmul_cuda_prepared.h"
#include "backend/cuda/ops_cuda.h"
#include "backend/cuda/ops_cuda_acts.h"
#include "backend/cuda/ops_cuda_fused.h"
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

template <class T>
std::vector<T> fetch(const T* d, size_t n) {
  POLYKV_CUDA_CHECK(cudaStreamSynchronize(ctx().stream()));
  std::vector<T> v(n);
  POLYKV_CUDA_CHECK(cudaMemcpy(v.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
  return v;
}

// The activations prepare_acts writes for x ([total] floats as [total / n_in][n_in]), downloaded.
struct HostActs {
  std::vector<int8_t> qs;
  std::vector<cuda::hd::ActScale> s;
};
HostActs reference_acts(const float* x, int64_t total, int64_t n_in) {
  WeightMatrix w;
  w.type = DType::Q8_0;
  w.n_in = n_in;
  w.n_out = 1;
  const cuda::ActView a = cuda::prepare_acts(w, x, int(total / n_in), ctx());
  return {fetch(a.qs, size_t(total)), fetch(a.s, size_t(total / 32))};
}
HostActs fetch_acts(const cuda::ActsOut& o, int64_t total) {
  return {fetch(o.qs, size_t(total)), fetch(static_cast<const cuda::hd::ActScale*>(o.scales), size_t(total / 32))};
}

::testing::AssertionResult same_acts(const HostActs& got, const HostActs& want, const std::string& what) {
  for (size_t i = 0; i < want.qs.size(); ++i)
    if (got.qs[i] != want.qs[i])
      return ::testing::AssertionFailure() << what << ": quant " << i << " is " << int(got.qs[i]) << ", want "
                                           << int(want.qs[i]);
  for (size_t b = 0; b < want.s.size(); ++b)
    if (std::memcmp(&got.s[b], &want.s[b], sizeof(cuda::hd::ActScale)) != 0)
      return ::testing::AssertionFailure() << what << ": scale of block " << b << " is {" << got.s[b].d << ", "
                                           << got.s[b].s_lo << ", " << got.s[b].s_hi << ", " << got.s[b].s_all
                                           << "}, want {" << want.s[b].d << ", " << want.s[b].s_lo << ", "
                                           << want.s[b].s_hi << ", " << want.s[b].s_all << "}";
  return ::testing::AssertionSuccess();
}

TEST(OpsActsCuda, RmsnormActsEqualPlainOps) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 3;
  // The one-block kernel, and on sm_90 the 8-block cluster kernel (every block computing the row's
  // norm, each writing its slice): cols 7968 and 8192 take its 32-values-per-thread form, 1056 and 3104
  // leave slices with no values to write.
  int major = 0;
  POLYKV_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
  for (int clusters = 0; clusters < (major >= 9 ? 2 : 1); ++clusters)
  for (int rows : {1, 2, 5, 8}) {
    for (int cols : {32, 96, 1056, 2048, 3104, 4096, 5120, 7968, 8192}) {
      for (int mode = 0; mode < 3; ++mode) {  // 0: rmsnorm; 1: add + rmsnorm, out = r; 2: rmsnorm, out = x
        const std::string what = std::string(mode == 0 ? "rmsnorm" : mode == 1 ? "add_rmsnorm (out = r)" : "rmsnorm (out = x)") +
                                 " rows " + std::to_string(rows) + " cols " + std::to_string(cols) +
                                 (clusters ? " (clusters)" : "");
        const size_t n = size_t(rows) * size_t(cols);
        const auto x0 = test::gpu_randn(n, ++seed, 2.0f), r0 = test::gpu_randn(n, ++seed), w0 = test::gpu_randn(size_t(cols), ++seed);
        DeviceFloats w(w0);
        DeviceFloats xp(x0), rp(r0), outp(n);
        POLYKV_CUDA_CHECK(cudaDeviceSynchronize());  // the uploads (pageable cudaMemcpy) have landed
        if (mode == 1) cuda::add(xp.get(), rp.get(), int64_t(n), ctx().stream());
        cuda::rmsnorm(xp.get(), w.get(), mode == 2 ? xp.get() : outp.get(), rows, cols, 1e-6f, ctx().stream());
        const float* want_out = mode == 2 ? xp.get() : outp.get();
        const HostActs want = reference_acts(want_out, int64_t(n), cols);

        DeviceFloats xf(x0), rf(r0), outf(n);
        POLYKV_CUDA_CHECK(cudaDeviceSynchronize());  // the uploads (pageable cudaMemcpy) have landed
        const cuda::ActsOut o = cuda::fused_acts_buffer(int64_t(n), ctx());
        float* out = mode == 0 ? outf.get() : mode == 1 ? rf.get() : xf.get();
        cuda::rmsnorm_acts(xf.get(), mode == 1 ? rf.get() : nullptr, w.get(), out, rows, cols, 1e-6f, o, ctx().stream(),
                           /*pdl=*/mode == 1, clusters == 1);
        POLYKV_CUDA_CHECK(cudaStreamSynchronize(ctx().stream()));
        EXPECT_TRUE(test::same_bits(fetch(out, n), fetch(want_out, n), what + ": out"));
        EXPECT_TRUE(test::same_bits(xf.download(), xp.download(), what + ": x"));
        EXPECT_TRUE(same_acts(fetch_acts(o, int64_t(n)), want, what + ": activations"));
        EXPECT_TRUE(xf.guard_intact(what + ": x") && rf.guard_intact(what + ": r") && outf.guard_intact(what + ": out"));
        if (HasFailure()) return;
      }
    }
  }
}

TEST(OpsActsCuda, GatedActsEqualPlainOp) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 40;
  for (Activation act : {Activation::SiLU, Activation::GeluTanh}) {
    for (int64_t n : {int64_t(32), int64_t(14336), int64_t(3 * 14336), int64_t(8 * 11008), int64_t(256 * 1024 + 96)}) {
      const std::string what = std::string(act == Activation::SiLU ? "silu" : "gelu") + " n " + std::to_string(n);
      const auto g0 = test::gpu_randn(size_t(n), ++seed, 2.0f), u0 = test::gpu_randn(size_t(n), ++seed);
      DeviceFloats gp(g0), up(u0), gf(g0), uf(u0);
      POLYKV_CUDA_CHECK(cudaDeviceSynchronize());  // the uploads (pageable cudaMemcpy) have landed
      cuda::gated_activation(gp.get(), up.get(), n, act, ctx().stream());
      const HostActs want = reference_acts(gp.get(), n, 32);
      const cuda::ActsOut o = cuda::fused_acts_buffer(n, ctx());
      cuda::gated_activation_acts(gf.get(), uf.get(), n, act, o, ctx().stream(), /*pdl=*/act == Activation::SiLU);
      EXPECT_TRUE(test::same_bits(gf.download(), gp.download(), what + ": gate"));
      EXPECT_TRUE(same_acts(fetch_acts(o, n), want, what + ": activations"));
      EXPECT_TRUE(gf.guard_intact(what + ": gate"));
      if (HasFailure()) return;
    }
  }
}

// A matrix's bytes on the device (packed rows, cudaMalloc's alignment).
struct DevMatrix {
  void* buf = nullptr;
  WeightMatrix m;
  explicit DevMatrix(const cuda_test::Weights& w) {
    const size_t n = w.m.row_stride * size_t(w.m.n_out);
    POLYKV_CUDA_CHECK(cudaMalloc(&buf, n + 256));
    cuda_test::h2d(buf, w.bytes.data() + w.offset, n);
    m = w.m;
    m.data = buf;
  }
  ~DevMatrix() { cudaFree(buf); }
  DevMatrix(const DevMatrix&) = delete;
  DevMatrix& operator=(const DevMatrix&) = delete;
};

TEST(OpsActsCuda, PreparedMatmulEqualsMatmul) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 70;
  for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q6_K, DType::Q5_0}) {
    for (int64_t n_in : {int64_t(256), int64_t(4096)}) {
      DevMatrix a(cuda_test::make_weights(t, n_in, 77, ++seed)), b(cuda_test::make_weights(t, n_in, 300, ++seed));
      for (int n : {1, 3, 8, 11, 32}) {
        const std::string what = std::string(dtype_name(t)) + " n_in " + std::to_string(n_in) + " n " + std::to_string(n);
        const size_t total = size_t(n) * size_t(n_in);
        DeviceFloats x(test::gpu_randn(total, ++seed)), w(test::gpu_randn(size_t(n_in), ++seed));
        DeviceFloats h(total), ya(size_t(n) * 77), pa(size_t(n) * 77), pb(size_t(n) * 300);
        POLYKV_CUDA_CHECK(cudaDeviceSynchronize());  // the uploads (pageable cudaMemcpy) have landed
        // h = rmsnorm(x) with its activations; then the prepared mat-vecs against plain matmul on h.
        const cuda::ActsOut o = cuda::fused_acts_buffer(int64_t(total), ctx());
        cuda::rmsnorm_acts(x.get(), nullptr, w.get(), h.get(), n, int(n_in), 1e-5f, o, ctx().stream());
        cuda::matmul_prepared(a.m, o, ya.get(), n, ctx());
        const cuda::MatvecPart parts[] = {{&a.m, pa.get()}, {&b.m, pb.get()}};
        cuda::matmul_parts_prepared(parts, o, n, ctx());
        DeviceFloats ra(size_t(n) * 77), rb(size_t(n) * 300);
        cuda::matmul(a.m, h.get(), ra.get(), n, ctx());
        cuda::matmul(b.m, h.get(), rb.get(), n, ctx());
        const auto want_a = ra.download(), want_b = rb.download();
        EXPECT_TRUE(test::same_bits(ya.download(), want_a, what + ": matmul_prepared"));
        EXPECT_TRUE(test::same_bits(pa.download(), want_a, what + ": parts_prepared part 0"));
        EXPECT_TRUE(test::same_bits(pb.download(), want_b, what + ": parts_prepared part 1"));
        EXPECT_TRUE(ya.guard_intact(what) && pa.guard_intact(what) && pb.guard_intact(what));
        if (HasFailure()) return;
      }
    }
  }
}

}  // namespace
}  // namespace polykv
