// GPU tests of the fused ops (backend/cuda/ops_cuda_fused.h; skip without a GPU): add_rmsnorm against
// add then rmsnorm, rope_qk against rope on q then on k, qk_norm_rope against rmsnorm of q's and k's heads then
// rope_qk, bit for bit, at awkward sizes, with out
// aliasing the residual as the decoder calls it, with and without programmatic dependent launch;
// guard zones after every buffer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cuda/cuda_context.h"
#include "backend/cuda/ops_cuda.h"
#include "backend/cuda/ops_cuda_fused.h"
#include "cuda_test_util.h"
#include "ops_cuda_test.h"

namespace polykv {
namespace {

using test::DeviceFloats;
using test::DeviceInts;

// A stream of the backend's kind (programmatic dependent launch is for such streams).
cudaStream_t stream() {
  static std::unique_ptr<cuda::CudaContext> c = std::make_unique<cuda::CudaContext>(0);
  return c->stream();
}

TEST(OpsFusedCuda, AddRmsnormEqualsAddThenRmsnorm) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 1;
  for (int rows : {1, 3, 17}) {
    for (int cols : {1, 100, 4096, 5120, 257}) {
      for (bool alias : {true, false}) {
        const std::string what = "add_rmsnorm rows " + std::to_string(rows) + " cols " + std::to_string(cols) +
                                 (alias ? " out = r" : " out separate");
        const size_t n = size_t(rows) * size_t(cols);
        const auto x0 = test::gpu_randn(n, ++seed, 3.0f), r0 = test::gpu_randn(n, ++seed), w0 = test::gpu_randn(size_t(cols), ++seed);
        DeviceFloats w(w0);
        // Plain: x += r; out = rmsnorm(x).
        DeviceFloats xp(x0), rp(r0), outp(n);
        cuda::add(xp.get(), rp.get(), int64_t(n), stream());
        cuda::rmsnorm(xp.get(), w.get(), outp.get(), rows, cols, 1e-5f, stream());
        // Fused.
        DeviceFloats xf(x0), rf(r0), outf(n);
        POLYKV_CUDA_CHECK(cudaDeviceSynchronize());  // the uploads (pageable cudaMemcpy) have landed
        // With PDL when aliased (as the backend launches it; the bits must not change).
        cuda::add_rmsnorm(xf.get(), rf.get(), w.get(), alias ? rf.get() : outf.get(), rows, cols, 1e-5f, stream(), alias);
        EXPECT_TRUE(test::same_bits(xf.download(), xp.download(), what + ": x"));
        EXPECT_TRUE(test::same_bits((alias ? rf : outf).download(), outp.download(), what + ": out"));
        EXPECT_TRUE(xf.guard_intact(what + ": x"));
        EXPECT_TRUE(rf.guard_intact(what + ": r"));
        EXPECT_TRUE(outf.guard_intact(what + ": out"));
        if (HasFailure()) return;
      }
    }
  }
}

TEST(OpsFusedCuda, RopeQkEqualsTwoRopes) {
  POLYKV_REQUIRE_GPU();
  uint32_t seed = 50;
  for (RopeStyle style : {RopeStyle::Norm, RopeStyle::Neox}) {
    for (int rows : {1, 2, 7}) {
      for (auto [n_head, n_head_kv, head_dim, n_rot] : {std::tuple{32, 8, 128, 128}, std::tuple{3, 1, 64, 32},
                                                        std::tuple{4, 4, 256, 64}, std::tuple{5, 2, 6, 0}}) {
        const std::string what = "rope_qk " + std::string(style == RopeStyle::Norm ? "norm" : "neox") + " rows " +
                                 std::to_string(rows) + " heads " + std::to_string(n_head) + "/" +
                                 std::to_string(n_head_kv) + " head_dim " + std::to_string(head_dim) + " n_rot " +
                                 std::to_string(n_rot);
        const size_t nq = size_t(rows) * n_head * head_dim, nk = size_t(rows) * n_head_kv * head_dim;
        const auto q0 = test::gpu_randn(nq, ++seed), k0 = test::gpu_randn(nk, ++seed);
        std::vector<int32_t> pos(static_cast<size_t>(rows));
        for (int r = 0; r < rows; ++r) pos[size_t(r)] = 1000 * r + 17 + int(seed % 5);
        std::vector<float> f0(static_cast<size_t>(std::max(1, n_rot / 2)));
        for (size_t i = 0; i < f0.size(); ++i) f0[i] = 1.0f / std::pow(10000.0f, float(2 * i) / float(std::max(1, n_rot)));
        DeviceInts dpos(pos);
        DeviceFloats freq(f0);
        DeviceFloats qp(q0), kp(k0), qf(q0), kf(k0);
        POLYKV_CUDA_CHECK(cudaDeviceSynchronize());  // the uploads (pageable cudaMemcpy) have landed
        cuda::rope(qp.get(), rows, n_head, head_dim, n_rot, dpos.get(), freq.get(), 1.5f, style, stream());
        cuda::rope(kp.get(), rows, n_head_kv, head_dim, n_rot, dpos.get(), freq.get(), 1.5f, style, stream());
        cuda::rope_qk(qf.get(), n_head, kf.get(), n_head_kv, rows, head_dim, n_rot, dpos.get(), freq.get(), 1.5f,
                      style, stream(), rows == 2);
        EXPECT_TRUE(test::same_bits(qf.download(), qp.download(), what + ": q"));
        EXPECT_TRUE(test::same_bits(kf.download(), kp.download(), what + ": k"));
        EXPECT_TRUE(qf.guard_intact(what + ": q"));
        EXPECT_TRUE(kf.guard_intact(what + ": k"));
        if (HasFailure()) return;
      }
    }
  }
}

// Qwen 3's and Gemma 3's head norms and rope in one launch = rmsnorm of q's heads, of k's, then rope_qk, bit for bit;
// head sizes 6 to 2048 (the largest the one launch takes), partial and no rotation, with and without PDL.
TEST(OpsFusedCuda, QkNormRopeEqualsHeadNormsThenRopeQk) {
  POLYKV_REQUIRE_GPU();
  EXPECT_TRUE(cuda::qk_norm_rope_ok(2048));
  EXPECT_FALSE(cuda::qk_norm_rope_ok(2049));
  uint32_t seed = 90;
  for (RopeStyle style : {RopeStyle::Norm, RopeStyle::Neox}) {
    for (int rows : {1, 3}) {
      for (auto [n_head, n_head_kv, head_dim, n_rot] :
           {std::tuple{32, 8, 128, 128}, std::tuple{3, 1, 64, 32}, std::tuple{8, 4, 256, 256},
            std::tuple{2, 1, 512, 128}, std::tuple{5, 2, 6, 0}, std::tuple{1, 1, 2048, 2048}}) {
        const std::string what = "qk_norm_rope " + std::string(style == RopeStyle::Norm ? "norm" : "neox") +
                                 " rows " + std::to_string(rows) + " heads " + std::to_string(n_head) + "/" +
                                 std::to_string(n_head_kv) + " head_dim " + std::to_string(head_dim) + " n_rot " +
                                 std::to_string(n_rot);
        const size_t nq = size_t(rows) * n_head * head_dim, nk = size_t(rows) * n_head_kv * head_dim;
        const auto q0 = test::gpu_randn(nq, ++seed, 4.0f), k0 = test::gpu_randn(nk, ++seed, 4.0f);
        const auto qn0 = test::gpu_randn(size_t(head_dim), ++seed), kn0 = test::gpu_randn(size_t(head_dim), ++seed);
        std::vector<int32_t> pos(static_cast<size_t>(rows));
        for (int r = 0; r < rows; ++r) pos[size_t(r)] = 4000 * r + 9 + int(seed % 7);
        std::vector<float> f0(static_cast<size_t>(std::max(1, n_rot / 2)));
        for (size_t i = 0; i < f0.size(); ++i) f0[i] = 1.0f / std::pow(1e6f, float(2 * i) / float(std::max(1, n_rot)));
        DeviceInts dpos(pos);
        DeviceFloats freq(f0), qn(qn0), kn(kn0);
        DeviceFloats qp(q0), kp(k0), qf(q0), kf(k0);
        POLYKV_CUDA_CHECK(cudaDeviceSynchronize());  // the uploads (pageable cudaMemcpy) have landed
        cuda::rmsnorm(qp.get(), qn.get(), qp.get(), rows * n_head, head_dim, 1e-6f, stream());
        cuda::rmsnorm(kp.get(), kn.get(), kp.get(), rows * n_head_kv, head_dim, 1e-6f, stream());
        const std::vector<float> k_normed = kp.download();
        cuda::rope_qk(qp.get(), n_head, kp.get(), n_head_kv, rows, head_dim, n_rot, dpos.get(), freq.get(), 1.0f,
                      style, stream());
        cuda::qk_norm_rope(qf.get(), qn.get(), n_head, kf.get(), kn.get(), n_head_kv, rows, head_dim, 1e-6f, n_rot,
                           dpos.get(), freq.get(), 1.0f, style, stream(), rows == 3);
        EXPECT_TRUE(test::same_bits(qf.download(), qp.download(), what + ": q"));
        EXPECT_TRUE(test::same_bits(kf.download(), kp.download(), what + ": k"));
        if (n_rot > 0) EXPECT_FALSE(test::same_bits(kf.download(), k_normed, what + ": k rotated")) << what;
        EXPECT_TRUE(qf.guard_intact(what + ": q"));
        EXPECT_TRUE(kf.guard_intact(what + ": k"));
        if (HasFailure()) return;
      }
    }
  }
}

}  // namespace
}  // namespace polykv
