// Decode-speed benchmarks of the mat-vec path (disabled by default; run with
// --gtest_also_run_disabled_tests --gtest_filter='MatvecSpeedBench.*', scripts/gpu-speed.sh does):
//  * LaunchOverhead: what an empty kernel costs when timed like the mat-vec benchmarks (CUDA events
//    around one launch), plain, with a persistent-sized grid and shared memory, and a chain of them
//    in a graph (per kernel): the fixed cost every small kernel of a decode step pays.
//  * DecodeLayerFused: one llama-3.1-8b layer's mat-vecs as the model issues them with the fused ops
//    (q,k,v in one matmul_parts, wo, gate,up in one, down: 4 activation kernels + 4 mat-vecs) against
//    the seven separate calls (7 + 7), plain / PDL / CUDA graph, per weight type, against the floor.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <vector>

#include "backend/cuda/cuda_context.h"
#include "backend/cuda/matmul_cuda.h"
#include "backend/cuda/matmul_cuda_internal.h"
#include "cuda_test_util.h"

namespace polykv {
namespace {

cuda::CudaContext& ctx() {
  static std::unique_ptr<cuda::CudaContext> c = std::make_unique<cuda::CudaContext>(0);
  return *c;
}

using DevBuf = cuda_test::DeviceBuffer;
using cuda_test::random_device_bytes;

// Median of reps timings (events around each call, 3 warm-ups first), seconds.
template <class Fn>
double median_s(Fn&& fn, int reps = 30) {
  return cuda_test::median_seconds(ctx().stream(), fn, reps);
}

// Records fn's launches on the context's stream into a graph and returns the time of one replay.
template <class Fn>
double graph_s(Fn&& fn) {
  cudaStream_t s = ctx().stream();
  fn();  // warm: scratch sized, kernels configured
  POLYKV_CUDA_CHECK(cudaStreamSynchronize(s));
  cudaGraph_t g = nullptr;
  cudaGraphExec_t e = nullptr;
  POLYKV_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  fn();
  POLYKV_CUDA_CHECK(cudaStreamEndCapture(s, &g));
  POLYKV_CUDA_CHECK(cudaGraphInstantiate(&e, g, 0));
  const double t = median_s([&] { POLYKV_CUDA_CHECK(cudaGraphLaunch(e, s)); });
  cudaGraphExecDestroy(e);
  cudaGraphDestroy(g);
  return t;
}

__global__ void empty_kernel(int* sink) {
  extern __shared__ int smem[];
  if (sink && threadIdx.x == 1023) sink[0] = smem[0];
}

TEST(MatvecSpeedBench, DISABLED_LaunchOverhead) {
  POLYKV_REQUIRE_GPU();
  cudaStream_t s = ctx().stream();
  const int sms = ctx().sm_count();
  POLYKV_CUDA_CHECK(cudaFuncSetAttribute(empty_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 48 * 1024));
  auto one = [&](int blocks, int threads, size_t smem) {
    empty_kernel<<<blocks, threads, smem, s>>>(nullptr);
    POLYKV_CUDA_LAUNCHED();
  };
  std::printf("%-44s %9s\n", "empty kernel", "us");
  std::printf("%-44s %9.2f\n", "1 block x 32", 1e6 * median_s([&] { one(1, 32, 0); }));
  std::printf("%-44s %9.2f\n", "4 x SMs blocks x 256, 46 KB smem", 1e6 * median_s([&] { one(4 * sms, 256, 46 * 1024); }));
  std::printf("%-44s %9.2f\n", "10 in a row, 1 x 32 (per kernel)", 1e5 * median_s([&] {
                for (int i = 0; i < 10; ++i) one(1, 32, 0);
              }));
  std::printf("%-44s %9.2f\n", "10 in a graph, 1 x 32 (per kernel)", 1e5 * graph_s([&] {
                for (int i = 0; i < 10; ++i) one(1, 32, 0);
              }));
  std::printf("%-44s %9.2f\n", "10 in a graph, alternating smem (per kernel)", 1e5 * graph_s([&] {
                for (int i = 0; i < 10; ++i) one(i % 2 ? 4 * sms : sms, 256, i % 2 ? 46 * 1024 : 0);
              }));
}

struct Mat {
  std::unique_ptr<DevBuf> buf;
  WeightMatrix w;
  size_t bytes = 0;
};

Mat make_mat(DType t, int64_t n_out, int64_t n_in, uint64_t seed) {
  Mat m;
  m.w.type = t;
  m.w.n_in = n_in;
  m.w.n_out = n_out;
  m.w.row_stride = row_bytes(t, n_in);
  m.bytes = m.w.row_stride * size_t(n_out);
  m.buf = random_device_bytes(m.bytes, seed);
  m.w.data = m.buf->p;
  return m;
}

TEST(MatvecSpeedBench, DISABLED_DecodeLayerFused) {
  POLYKV_REQUIRE_GPU();
  // Copy bandwidth (read + written) of 1 GiB, the floor's divisor.
  double copy = 0;
  {
    const size_t n = size_t(1) << 30;
    DevBuf a(n), b(n);
    copy = 2.0 * double(n) / median_s([&] {
      POLYKV_CUDA_CHECK(cudaMemcpyAsync(b.p, a.p, n, cudaMemcpyDeviceToDevice, ctx().stream()));
    }, 10);
  }
  std::printf("device-to-device copy: %.0f GB/s (read + write)\n", copy * 1e-9);
  std::printf("%-5s %-22s %10s %10s %7s\n", "type", "launch", "layer_us", "floor_us", "%copy");
  for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q4_K}) {
    // wq, wk, wv, wo, w_gate, w_up, w_down of llama-3.1-8b.
    const int64_t shapes[7][2] = {{4096, 4096}, {1024, 4096}, {1024, 4096}, {4096, 4096},
                                  {14336, 4096}, {14336, 4096}, {4096, 14336}};
    std::vector<Mat> m;
    size_t bytes = 0;
    for (int i = 0; i < 7; ++i) {
      m.push_back(make_mat(t, shapes[i][0], shapes[i][1], uint64_t(20 + i)));
      bytes += m.back().bytes;
    }
    std::vector<float> xh(14336);
    for (size_t i = 0; i < xh.size(); ++i) xh[i] = float((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
    DevBuf x(14336 * 4), q(4096 * 4), k(1024 * 4), v(1024 * 4), h(4096 * 4), g(14336 * 4), u(14336 * 4);
    POLYKV_CUDA_CHECK(cudaMemcpy(x.p, xh.data(), xh.size() * 4, cudaMemcpyHostToDevice));
    const float* xf = static_cast<const float*>(x.p);
    auto F = [](DevBuf& b) { return static_cast<float*>(b.p); };
    auto separate = [&] {
      cuda::matmul(m[0].w, xf, F(q), 1, ctx());
      cuda::matmul(m[1].w, xf, F(k), 1, ctx());
      cuda::matmul(m[2].w, xf, F(v), 1, ctx());
      cuda::matmul(m[3].w, xf, F(h), 1, ctx());
      cuda::matmul(m[4].w, xf, F(g), 1, ctx());
      cuda::matmul(m[5].w, xf, F(u), 1, ctx());
      cuda::matmul(m[6].w, xf, F(h), 1, ctx());
    };
    auto fused = [&] {
      const cuda::MatvecPart qkv[] = {{&m[0].w, F(q)}, {&m[1].w, F(k)}, {&m[2].w, F(v)}};
      cuda::matmul_parts(qkv, xf, 1, ctx());
      cuda::matmul(m[3].w, xf, F(h), 1, ctx());
      const cuda::MatvecPart gu[] = {{&m[4].w, F(g)}, {&m[5].w, F(u)}};
      cuda::matmul_parts(gu, xf, 1, ctx());
      cuda::matmul(m[6].w, xf, F(h), 1, ctx());
    };
    const double floor_us = double(bytes) / copy * 1e6;
    auto report = [&](const char* how, double sec) {
      std::printf("%-5s %-22s %10.1f %10.1f %6.1f%%\n", dtype_name(t), how, sec * 1e6, floor_us,
                  100.0 * floor_us / (sec * 1e6));
    };
    for (int pdl = 0; pdl < 2; ++pdl) {
      cuda::set_matvec_pdl(pdl == 1);
      report(pdl ? "7 calls, pdl" : "7 calls, plain", median_s(separate));
      report(pdl ? "4 fused calls, pdl" : "4 fused calls, plain", median_s(fused));
    }
    report("7 calls, graph+pdl", graph_s(separate));
    report("4 fused calls, graph+pdl", graph_s(fused));
  }
}

}  // namespace
}  // namespace polykv
