// Producer kernels that also write the next mat-vec's 8-bit activations (ops_cuda_acts.h). Each
// float is computed by the same thread with the same operations as in ops_cuda.cu /
// ops_cuda_fused.cu; each block of 32 outputs is then quantized by one warp with
// quantize_act_block_warp, the function of the mat-vec path's own activation kernel.
// Both kernels may be launched with PDL (they wait for the kernel before them first) and let the next
// kernel start at once (matmul_cuda_launch.cuh): the mat-vec after them issues its weight copies
// while they run and waits for their completion before it reads the activations.
#include "backend/cuda/ops_cuda_acts.h"

#include <algorithm>

#include "backend/cuda/matmul_cuda_acts.cuh"
#include "backend/cuda/matmul_cuda_internal.h"
#include "backend/cuda/matmul_cuda_launch.cuh"
#include "backend/cuda/ops_cuda_math.cuh"
#include "backend/cuda/rms_row.cuh"
#include "core/error.h"

namespace polykv::cuda {
namespace {

// One block per row (as rmsnorm_kernel / add_rmsnorm_kernel). Thread t owns indices t + kRmsThreads j:
// a warp's 32 lanes own one block of 32 consecutive values per j (kRmsThreads and cols are
// multiples of 32), so the warp quantizes that block right after computing it.
template <int J>
__global__ void rmsnorm_acts_kernel(float* x, const float* r, const float* w, float* out, int cols, float eps,
                                    int8_t* __restrict__ qs, hd::ActScale* __restrict__ sc) {
  __shared__ double partials[math::kRmsThreads];
  __shared__ float inv;
  const int t = int(threadIdx.x), lane = t % 32;
  const int64_t row0 = int64_t(blockIdx.x) * cols;
  float* xr = x + row0;
  float* o = out + row0;
  if constexpr (J > 0) {  // the row in registers (rms_row.cuh)
    float wv[J], v[J];
    rms::load_weights(w, cols, t, wv);
    wait_for_previous_grid();
    allow_next_grid();
    rms::load_row(xr, r != nullptr ? r + row0 : nullptr, cols, t, v);
    if (r != nullptr) rms::store_row(xr, cols, t, v);
    const float in = rms::row_inv(v, cols, eps, t, partials, &inv);
#pragma unroll
    for (int j = 0; j < J; ++j) v[j] = math::rms_out(v[j], in, wv[j]);
    rms::store_row(o, cols, t, v);
    // The warp's blocks: values t - lane + kRmsThreads j .. + 31, flat block b0 + j * kRmsThreads / 32;
    // those at or past cols (warp-uniform: cols is a multiple of 32) are not written.
    const int first = t - lane;
    const int n_blocks = first < cols ? (cols - first + math::kRmsThreads - 1) / math::kRmsThreads : 0;
    const int64_t b0 = (row0 + first) / hd::kActBlock;
    quantize_act_blocks_warp<J>(v, n_blocks, lane, qs + b0 * hd::kActBlock, sc + b0,
                                math::kRmsThreads / hd::kActBlock);
  } else {
    wait_for_previous_grid();
    allow_next_grid();
    if (r != nullptr) {
      const float* rr = r + row0;
      for (int i = t; i < cols; i += math::kRmsThreads) xr[i] = math::add_rn(xr[i], rr[i]);
    }
    partials[t] = math::rms_partial(xr, cols, t);
    __syncthreads();
    for (int stride = math::kRmsThreads / 2; stride > 0; stride /= 2) {
      math::rms_tree_step(partials, t, stride);
      __syncthreads();
    }
    if (t == 0) inv = math::rms_inv(partials[0], cols, eps);
    __syncthreads();
    for (int i = t; i < cols; i += math::kRmsThreads) {  // warp-uniform trip count
      const float v = math::rms_out(xr[i], inv, w[i]);
      o[i] = v;
      const int64_t b = (row0 + i) / hd::kActBlock;  // the flat block of value i
      quantize_act_block_warp(v, lane, qs + b * hd::kActBlock, sc + b);
    }
  }
}

// Warp-aligned grid stride over n (n % 32 == 0): a warp takes one block of 32 values per step.
__global__ void gated_acts_kernel(float* gate, const float* up, int64_t n, Activation act, int8_t* __restrict__ qs,
                                  hd::ActScale* __restrict__ sc) {
  wait_for_previous_grid();
  allow_next_grid();
  const int lane = int(threadIdx.x % 32);
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t base = int64_t(blockIdx.x) * blockDim.x + threadIdx.x - lane; base < n; base += stride) {
    const int64_t i = base + lane;
    const float v = math::gated(gate[i], up[i], act);
    gate[i] = v;
    quantize_act_block_warp(v, lane, qs + base, sc + base / hd::kActBlock);
  }
}

size_t round_up(size_t v, size_t m) { return (v + m - 1) / m * m; }

}  // namespace

ActsOut fused_acts_buffer(int64_t total, CudaContext& ctx) {
  check(total > 0 && total % hd::kActBlock == 0, "fused activations: ", total, " values (a multiple of 32 > 0)");
  const size_t qs_bytes = round_up(size_t(total), 256);
  auto* buf = static_cast<uint8_t*>(
      ctx.scratch(Scratch::FusedActs, qs_bytes + size_t(total / hd::kActBlock) * sizeof(hd::ActScale)));
  ActsOut o;
  o.qs = reinterpret_cast<int8_t*>(buf);
  o.scales = buf + qs_bytes;
  return o;
}

void rmsnorm_acts(float* x, const float* r, const float* w, float* out, int rows, int cols, float eps, ActsOut acts,
                  cudaStream_t s, bool pdl) {
  check(rows >= 0 && acts_fusable(cols), "rmsnorm_acts: ", rows, " rows of ", cols, " (a multiple of 32)");
  check(acts.qs != nullptr && acts.scales != nullptr, "rmsnorm_acts: no activation buffer");
  if (rows == 0) return;
  auto* sc = static_cast<hd::ActScale*>(acts.scales);
  const dim3 grid{unsigned(rows)}, block{unsigned(math::kRmsThreads)};
  switch (rms::regs_for(cols)) {
    case 8: return launch_kernel(rmsnorm_acts_kernel<8>, grid, block, 0, s, pdl, x, r, w, out, cols, eps, acts.qs, sc);
    case 16: return launch_kernel(rmsnorm_acts_kernel<16>, grid, block, 0, s, pdl, x, r, w, out, cols, eps, acts.qs, sc);
    case 32: return launch_kernel(rmsnorm_acts_kernel<32>, grid, block, 0, s, pdl, x, r, w, out, cols, eps, acts.qs, sc);
    default: return launch_kernel(rmsnorm_acts_kernel<0>, grid, block, 0, s, pdl, x, r, w, out, cols, eps, acts.qs, sc);
  }
}

void gated_activation_acts(float* gate, const float* up, int64_t n, Activation act, ActsOut acts, cudaStream_t s,
                           bool pdl) {
  check(n >= 0 && n % kActsBlock == 0, "gated_activation_acts: ", n, " values (a multiple of 32)");
  check(acts.qs != nullptr && acts.scales != nullptr, "gated_activation_acts: no activation buffer");
  if (n == 0) return;
  constexpr int kThreads = 256;
  const int blocks = int(std::min<int64_t>((n + kThreads - 1) / kThreads, int64_t(1) << 16));
  launch_kernel(gated_acts_kernel, dim3(unsigned(blocks)), dim3(kThreads), 0, s, pdl, gate, up, n, act, acts.qs,
                static_cast<hd::ActScale*>(acts.scales));
}

}  // namespace polykv::cuda
