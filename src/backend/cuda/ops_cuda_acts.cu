// Producer kernels that also write the next mat-vec's 8-bit activations (ops_cuda_acts.h). Each
// float is computed by the same thread with the same operations as in ops_cuda.cu /
// ops_cuda_fused.cu; each block of 32 outputs is then quantized by one warp with
// quantize_act_block_warp, the function of the mat-vec path's own activation kernel.
// Both kernels may be launched with PDL (they wait for the kernel before them first) and let the next
// kernel start at once (matmul_cuda_launch.cuh): the mat-vec after them issues its weight copies
// while they run and waits for their completion before it reads the activations.
#include "backend/cuda/ops_cuda_acts.h"

#include <algorithm>
#include <cstdlib>
#include <string_view>

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

// The same row with 4x the threads (rows of at most kRmsThreads * J values, J = 8 or 16): one
// 256-thread block is latency-bound on one SM (5.5 us for a 4096-value row on an H200, 40% of it
// the quantization's shuffle chains: 16 blocks per warp). Here thread t of kWideThreads loads values
// t + kWideThreads j (J / 4 of them: all loads in flight at once), parks them in shared memory,
// and threads t < kRmsThreads then form exactly the partials of the 256-thread order (values t +
// kRmsThreads j squared and added in ascending j, in double) and the same tree (rms_row.cuh), so
// inv, the outputs and the activations are rmsnorm_acts_kernel's bits; each warp quantizes J / 4
// blocks instead of J.
constexpr int kWideThreads = 4 * math::kRmsThreads;

template <int J>
__global__ void __launch_bounds__(kWideThreads)
    rmsnorm_acts_wide_kernel(float* x, const float* r, const float* w, float* out, int cols, float eps,
                             int8_t* __restrict__ qs, hd::ActScale* __restrict__ sc) {
  static_assert(J % 4 == 0);
  constexpr int JW = J / 4;
  __shared__ float row[math::kRmsThreads * J];  // [cols] the row (after the residual add)
  __shared__ double partials[math::kRmsThreads];
  __shared__ float inv;
  const int t = int(threadIdx.x), lane = t % 32;
  const int64_t row0 = int64_t(blockIdx.x) * cols;
  float* xr = x + row0;
  float* o = out + row0;
  float wv[JW], v[JW], a[JW];
#pragma unroll
  for (int j = 0; j < JW; ++j) {
    const int i = t + kWideThreads * j;
    wv[j] = i < cols ? w[i] : 0.0f;
  }
  wait_for_previous_grid();
  allow_next_grid();
#pragma unroll
  for (int j = 0; j < JW; ++j) {  // every load before any store (out and r may alias x)
    const int i = t + kWideThreads * j;
    v[j] = i < cols ? xr[i] : 0.0f;
    a[j] = r != nullptr && i < cols ? r[row0 + i] : 0.0f;
  }
  if (r != nullptr) {
#pragma unroll
    for (int j = 0; j < JW; ++j) v[j] = math::add_rn(v[j], a[j]);
  }
#pragma unroll
  for (int j = 0; j < JW; ++j) {
    const int i = t + kWideThreads * j;
    if (i < cols) {
      row[i] = v[j];
      if (r != nullptr) xr[i] = v[j];
    }
  }
  __syncthreads();
  if (t < math::kRmsThreads) {  // thread t's partial of the 256-thread order
    double s = 0;
#pragma unroll
    for (int j = 0; j < J; ++j) {
      const int i = t + math::kRmsThreads * j;
      if (i < cols) s = math::dadd_rn(s, math::dmul_rn(double(row[i]), double(row[i])));
    }
    partials[t] = s;
  }
  __syncthreads();
#pragma unroll
  for (int stride = math::kRmsThreads / 2; stride >= 32; stride /= 2) {
    math::rms_tree_step(partials, t, stride);
    __syncthreads();
  }
  if (t < 32) {  // as rms::row_inv_of_partial
    double p = partials[t];
#pragma unroll
    for (int stride = 16; stride > 0; stride /= 2) {
      const double q = __shfl_down_sync(0xffffffffu, p, stride);
      if (t < stride) p = math::dadd_rn(p, q);
    }
    if (t == 0) inv = math::rms_inv(p, cols, eps);
  }
  __syncthreads();
  const float in = inv;
#pragma unroll
  for (int j = 0; j < JW; ++j) {
    const int i = t + kWideThreads * j;
    v[j] = math::rms_out(v[j], in, wv[j]);
    if (i < cols) o[i] = v[j];
  }
  const int first = t - lane;
  const int n_blocks = first < cols ? (cols - first + kWideThreads - 1) / kWideThreads : 0;
  const int64_t b0 = (row0 + first) / hd::kActBlock;
  quantize_act_blocks_warp<JW>(v, n_blocks, lane, qs + b0 * hd::kActBlock, sc + b0, kWideThreads / hd::kActBlock);
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

// POLYKV_CUDA_RMS_WIDE=0: the 256-thread kernel for every row (A/B benchmarks; the bits are equal).
bool wide_rmsnorm_acts() {
  static const bool on = [] {
    const char* e = std::getenv("POLYKV_CUDA_RMS_WIDE");
    return e == nullptr || std::string_view(e) != "0";
  }();
  return on;
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
  const dim3 grid{unsigned(rows)}, block{unsigned(math::kRmsThreads)}, wide{unsigned(kWideThreads)};
  if (wide_rmsnorm_acts()) {
    switch (rms::regs_for(cols)) {
      case 8: return launch_kernel(rmsnorm_acts_wide_kernel<8>, grid, wide, 0, s, pdl, x, r, w, out, cols, eps, acts.qs, sc);
      case 16: return launch_kernel(rmsnorm_acts_wide_kernel<16>, grid, wide, 0, s, pdl, x, r, w, out, cols, eps, acts.qs, sc);
      default: break;
    }
  }
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
