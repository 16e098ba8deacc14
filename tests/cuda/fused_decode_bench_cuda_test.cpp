// GPU benchmarks of the fused decode mat-vecs (matmul_cuda_norm.h) against the launches they replace.
// OutputProjections: the fused output projection against the mat-vec and add_rmsnorm it replaces, on llama-3.1-8b's shapes (wo 4096x4096, down 4096x14336; q4_0 and q4_K in the split
// layout): µs per (mat-vec + add + rmsnorm + activations), in a CUDA graph of 64 in a row with PDL, as
// decode runs them. The weights rotate over copies of >= 256 MiB so that L2 holds none. Disabled: run
// with --gtest_also_run_disabled_tests --gtest_filter=FuseDecCudaBench.* (GateUpGated: below)
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_context.h"
#include "backend/cuda/matmul_cuda.h"
#include "backend/cuda/matmul_cuda_norm.h"
#include "backend/cuda/matmul_cuda_prepared.h"
#include "backend/cuda/matmul_cuda_split.h"
#include "backend/cuda/ops_cuda_acts.h"
#include "cuda_test_util.h"
#include "matmul_cuda_test_util.h"

namespace polykv {
namespace {

float* device_floats(const std::vector<float>& h) {
  float* p = nullptr;
  POLYKV_CUDA_CHECK(cudaMalloc(&p, h.size() * sizeof(float)));
  POLYKV_CUDA_CHECK(cudaMemcpy(p, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice));
  return p;
}

TEST(FuseDecCudaBench, DISABLED_OutputProjections) {
  POLYKV_REQUIRE_GPU();
  cuda::CudaContext ctx(0);
  const bool pdl = cuda::pdl_enabled(ctx);
  unsigned* counter = nullptr;
  POLYKV_CUDA_CHECK(cudaMalloc(&counter, sizeof(unsigned)));
  POLYKV_CUDA_CHECK(cudaMemset(counter, 0, sizeof(unsigned)));
  struct Case {
    const char* name;
    DType t;
    int64_t n_out, n_in;
    bool prepared;  // down: activations from the gated activation; wo: the mat-vec's own
  };
  const Case cases[] = {{"wo   q4_0", DType::Q4_0, 4096, 4096, false}, {"down q4_0", DType::Q4_0, 4096, 14336, true},
                        {"wo   q4_K", DType::Q4_K, 4096, 4096, false}, {"down q4_K", DType::Q4_K, 4096, 14336, true}};
  std::printf("%-10s %12s %12s %10s  (us per projection, graph of 64, PDL %s)\n", "shape", "plain", "fused", "saved",
              pdl ? "on" : "off");
  for (const Case& c : cases) {
    const cuda_test::Weights hw = cuda_test::make_weights(c.t, c.n_in, c.n_out, 5, /*quantized=*/false);
    const size_t bytes = cuda::split_row_stride(c.t, c.n_in) * size_t(c.n_out);
    const int copies = int(std::max<size_t>(2, (size_t(256) << 20) / bytes + 1));
    std::vector<void*> bufs(static_cast<size_t>(copies));
    std::vector<WeightMatrix> w(static_cast<size_t>(copies));
    for (int i = 0; i < copies; ++i) {
      POLYKV_CUDA_CHECK(cudaMalloc(&bufs[size_t(i)], bytes + 256));
      w[size_t(i)] = cuda::upload_split(hw.m, bufs[size_t(i)], ctx.stream());
    }
    float* in = device_floats(cuda_test::normal_floats(size_t(c.n_in), 1, 1.0f));
    float* up = device_floats(cuda_test::normal_floats(size_t(c.n_in), 2, 1.0f));
    float* x = device_floats(cuda_test::normal_floats(size_t(c.n_out), 3, 1.0f));
    float* nw = device_floats(cuda_test::normal_floats(size_t(c.n_out), 4, 1.0f));
    float* h = device_floats(std::vector<float>(size_t(c.n_out)));
    const cuda::ActsOut a = cuda::fused_acts_buffer(c.n_in, ctx);
    cuda::gated_activation_acts(in, up, c.n_in, Activation::SiLU, a, ctx.stream(), false);
    const cuda::ActsOut b = cuda::fused_acts_buffer(c.n_out, ctx, cuda::Scratch::FusedActsOut);
    POLYKV_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
    double us[2] = {0, 0};
    for (int fused = 0; fused < 2; ++fused) {
      constexpr int kPerGraph = 64;
      auto issue = [&](int i) {
        const WeightMatrix& wi = w[size_t(i % copies)];
        if (fused) {
          cuda::matmul_add_rmsnorm(wi, in, c.prepared ? &a : nullptr, x, nw, h, 1e-5f, b, counter, ctx);
        } else {
          if (c.prepared)
            cuda::matmul_prepared(wi, a, h, 1, ctx);
          else
            cuda::matvec(wi, in, h, 1, ctx);
          cuda::rmsnorm_acts(x, h, nw, h, 1, int(c.n_out), 1e-5f, b, ctx.stream(), pdl);
        }
      };
      for (int i = 0; i < kPerGraph; ++i) issue(i);  // warm (and grows any scratch before the capture)
      POLYKV_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
      cudaGraph_t g = nullptr;
      cudaGraphExec_t ge = nullptr;
      POLYKV_CUDA_CHECK(cudaStreamBeginCapture(ctx.stream(), cudaStreamCaptureModeThreadLocal));
      for (int i = 0; i < kPerGraph; ++i) issue(i);
      POLYKV_CUDA_CHECK(cudaStreamEndCapture(ctx.stream(), &g));
      POLYKV_CUDA_CHECK(cudaGraphInstantiate(&ge, g, 0));
      POLYKV_CUDA_CHECK(cudaGraphLaunch(ge, ctx.stream()));
      cudaEvent_t e0, e1;
      POLYKV_CUDA_CHECK(cudaEventCreate(&e0));
      POLYKV_CUDA_CHECK(cudaEventCreate(&e1));
      constexpr int kLaunches = 20;
      POLYKV_CUDA_CHECK(cudaEventRecord(e0, ctx.stream()));
      for (int r = 0; r < kLaunches; ++r) POLYKV_CUDA_CHECK(cudaGraphLaunch(ge, ctx.stream()));
      POLYKV_CUDA_CHECK(cudaEventRecord(e1, ctx.stream()));
      POLYKV_CUDA_CHECK(cudaEventSynchronize(e1));
      float ms = 0;
      POLYKV_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
      us[fused] = 1000.0 * ms / (kLaunches * kPerGraph);
      cudaEventDestroy(e0);
      cudaEventDestroy(e1);
      cudaGraphExecDestroy(ge);
      cudaGraphDestroy(g);
    }
    std::printf("%-10s %12.2f %12.2f %10.2f\n", c.name, us[0], us[1], us[0] - us[1]);
    for (void* p : bufs) cudaFree(p);
    for (float* p : {in, up, x, nw, h}) cudaFree(p);
  }
  cudaFree(counter);
}

// gate,up (14336 x 4096 each) and the gated activation with down's activations: matmul_parts_prepared
// + gated_activation_acts (2 launches) against matmul_gated (1), same graph setup as above.
TEST(FuseDecCudaBench, DISABLED_GateUpGated) {
  POLYKV_REQUIRE_GPU();
  cuda::CudaContext ctx(0);
  const bool pdl = cuda::pdl_enabled(ctx);
  std::printf("%-10s %12s %12s %10s  (us per gate,up + gated activation, graph of 64, PDL %s)\n", "type", "plain",
              "fused", "saved", pdl ? "on" : "off");
  for (DType t : {DType::Q4_0, DType::Q4_K}) {
    const int64_t n_ff = 14336, n_in = 4096;
    const cuda_test::Weights hg = cuda_test::make_weights(t, n_in, n_ff, 7), hu = cuda_test::make_weights(t, n_in, n_ff, 8);
    const size_t bytes = cuda::split_row_stride(t, n_in) * size_t(n_ff);
    const int copies = int(std::max<size_t>(2, (size_t(256) << 20) / (2 * bytes) + 1));
    std::vector<void*> bufs;
    std::vector<WeightMatrix> wg, wu;
    for (int i = 0; i < copies; ++i) {
      void* a = nullptr;
      void* b = nullptr;
      POLYKV_CUDA_CHECK(cudaMalloc(&a, bytes + 256));
      POLYKV_CUDA_CHECK(cudaMalloc(&b, bytes + 256));
      bufs.push_back(a);
      bufs.push_back(b);
      wg.push_back(cuda::upload_split(hg.m, a, ctx.stream()));
      wu.push_back(cuda::upload_split(hu.m, b, ctx.stream()));
    }
    float* x = device_floats(cuda_test::normal_floats(size_t(n_in), 1, 1.0f));
    float* nw = device_floats(cuda_test::normal_floats(size_t(n_in), 2, 1.0f));
    float* h = device_floats(std::vector<float>(size_t(n_in)));
    float* g = device_floats(std::vector<float>(size_t(n_ff)));
    float* u = device_floats(std::vector<float>(size_t(n_ff)));
    const cuda::ActsOut a = cuda::fused_acts_buffer(n_in, ctx, cuda::Scratch::FusedActsOut);
    cuda::rmsnorm_acts(x, nullptr, nw, h, 1, int(n_in), 1e-5f, a, ctx.stream(), false);
    const cuda::ActsOut o = cuda::fused_acts_buffer(n_ff, ctx, cuda::Scratch::FusedActsGated);
    POLYKV_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
    double us[2] = {0, 0};
    for (int fused = 0; fused < 2; ++fused) {
      constexpr int kPerGraph = 64;
      auto issue = [&](int i) {
        const size_t k = size_t(i % copies);
        if (fused) {
          cuda::matmul_gated(wg[k], wu[k], h, &a, g, u, Activation::SiLU, o, ctx);
        } else {
          const cuda::MatvecPart parts[] = {{&wg[k], g}, {&wu[k], u}};
          cuda::matmul_parts_prepared(parts, a, 1, ctx);
          cuda::gated_activation_acts(g, u, n_ff, Activation::SiLU, o, ctx.stream(), pdl);
        }
      };
      for (int i = 0; i < kPerGraph; ++i) issue(i);
      POLYKV_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
      cudaGraph_t gr = nullptr;
      cudaGraphExec_t ge = nullptr;
      POLYKV_CUDA_CHECK(cudaStreamBeginCapture(ctx.stream(), cudaStreamCaptureModeThreadLocal));
      for (int i = 0; i < kPerGraph; ++i) issue(i);
      POLYKV_CUDA_CHECK(cudaStreamEndCapture(ctx.stream(), &gr));
      POLYKV_CUDA_CHECK(cudaGraphInstantiate(&ge, gr, 0));
      POLYKV_CUDA_CHECK(cudaGraphLaunch(ge, ctx.stream()));
      cudaEvent_t e0, e1;
      POLYKV_CUDA_CHECK(cudaEventCreate(&e0));
      POLYKV_CUDA_CHECK(cudaEventCreate(&e1));
      constexpr int kLaunches = 10;
      POLYKV_CUDA_CHECK(cudaEventRecord(e0, ctx.stream()));
      for (int r = 0; r < kLaunches; ++r) POLYKV_CUDA_CHECK(cudaGraphLaunch(ge, ctx.stream()));
      POLYKV_CUDA_CHECK(cudaEventRecord(e1, ctx.stream()));
      POLYKV_CUDA_CHECK(cudaEventSynchronize(e1));
      float ms = 0;
      POLYKV_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
      us[fused] = 1000.0 * ms / (kLaunches * kPerGraph);
      cudaEventDestroy(e0);
      cudaEventDestroy(e1);
      cudaGraphExecDestroy(ge);
      cudaGraphDestroy(gr);
    }
    std::printf("%-10s %12.2f %12.2f %10.2f\n", dtype_name(t), us[0], us[1], us[0] - us[1]);
    for (void* p : bufs) cudaFree(p);
    for (float* p : {x, nw, h, g, u}) cudaFree(p);
  }
}

}  // namespace
}  // namespace polykv
