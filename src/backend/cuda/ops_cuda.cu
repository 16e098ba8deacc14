// Element-wise and normalization kernels (backend/cuda/ops_cuda.h). The arithmetic of one element
// is in ops_cuda_math.cuh (shared with the host tests); this file only maps threads onto it.
// Every output element is computed from its own row's inputs by one thread in a fixed order, so
// results never depend on the number of rows or the launch shape (backend/backend.h's rule).
#include "backend/cuda/ops_cuda.h"

#include <algorithm>

#include "backend/cuda/ops_cuda_math.cuh"
#include "backend/cuda/rms_row.cuh"

namespace polykv::cuda {
namespace {

constexpr int kThreads = 256;
// Grid-stride loops cover any n with at most this many blocks (enough to fill any GPU).
constexpr int64_t kMaxBlocks = 1 << 16;

int blocks_for(int64_t n) { return int(std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks)); }

// One block per row; x and out may alias (every element is read into the sum before any is written).
// J > 0: the row in registers (rms_row.cuh); J = 0: rows longer than kRmsThreads * 32.
template <int J>
__global__ void rmsnorm_kernel(const float* x, const float* w, float* out, int cols, float eps) {
  __shared__ double partials[math::kRmsThreads];
  __shared__ float inv;
  const int t = int(threadIdx.x);
  const float* xr = x + int64_t(blockIdx.x) * cols;
  float* o = out + int64_t(blockIdx.x) * cols;
  if constexpr (J > 0) {
    float wv[J], v[J];
    rms::load_weights(w, cols, t, wv);
    rms::load_row(xr, nullptr, cols, t, v);
    const float in = rms::row_inv(v, cols, eps, t, partials, &inv);
#pragma unroll
    for (int j = 0; j < J; ++j) v[j] = math::rms_out(v[j], in, wv[j]);
    rms::store_row(o, cols, t, v);
  } else {
    partials[t] = math::rms_partial(xr, cols, t);
    __syncthreads();
    for (int stride = math::kRmsThreads / 2; stride > 0; stride /= 2) {
      math::rms_tree_step(partials, t, stride);
      __syncthreads();
    }
    if (t == 0) inv = math::rms_inv(partials[0], cols, eps);
    __syncthreads();
    for (int i = t; i < cols; i += math::kRmsThreads) o[i] = math::rms_out(xr[i], inv, w[i]);
  }
}

__global__ void add_bias_kernel(float* x, const float* b, int64_t rows, int cols) {
  const int64_t n = rows * cols;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    x[i] = math::add_rn(x[i], b[i % cols]);
}

__global__ void add_kernel(float* x, const float* y, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    x[i] = math::add_rn(x[i], y[i]);
}

__global__ void rope_kernel(float* x, int64_t n_pairs, int n_heads, int head_dim, int n_rot, const int32_t* pos,
                            const float* inv_freq, float scale, RopeStyle style) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n_pairs; i += int64_t(gridDim.x) * blockDim.x)
    math::rope_pair(x, i, n_heads, head_dim, n_rot, pos, inv_freq, scale, style);
}

__global__ void gated_kernel(float* gate, const float* up, int64_t n, Activation act) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    gate[i] = math::gated(gate[i], up[i], act);
}

__global__ void softcap_kernel(float* x, int64_t n, float cap) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    x[i] = math::softcap1(x[i], cap);
}

// dst[i][c] = src[rows[i]][c]; one flat index per destination element.
__global__ void gather_rows_kernel(const float* src, const int32_t* rows, int64_t n, int cols, float* dst) {
  const int64_t total = n * cols;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = src[int64_t(rows[i / cols]) * cols + i % cols];
}

// The better of two (value, index) candidates: the larger value, on equal values the lower index; an
// index of -1 (no usable value yet, value -inf) never beats a real one.
__device__ __forceinline__ void argmax_pick(float& v, int32_t& i, float ov, int32_t oi) {
  if (oi >= 0 && (i < 0 || ov > v || (ov == v && oi < i))) v = ov, i = oi;
}

constexpr int kArgmaxThreads = 512;

// One block per row of x [rows][cols]: each thread the first maximum of its strided elements (x > best:
// NaN and -inf never win, so the first maximum in its own id order), then the block's by argmax_pick,
// whose result is the row's first maximum whatever the reduction order.
__global__ void __launch_bounds__(kArgmaxThreads) argmax_rows_kernel(const float* x, int cols, int32_t* out) {
  const float* row = x + size_t(blockIdx.x) * size_t(cols);
  float v = -INFINITY;
  int32_t idx = -1;
  for (int c = threadIdx.x; c < cols; c += kArgmaxThreads) {
    const float e = row[c];
    if (e > v) v = e, idx = c;
  }
#pragma unroll
  for (int o = 16; o > 0; o /= 2) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int32_t oi = __shfl_xor_sync(0xffffffffu, idx, o);
    argmax_pick(v, idx, ov, oi);
  }
  __shared__ float sv[kArgmaxThreads / 32];
  __shared__ int32_t si[kArgmaxThreads / 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) sv[warp] = v, si[warp] = idx;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kArgmaxThreads / 32; ++w) argmax_pick(v, idx, sv[w], si[w]);
    out[blockIdx.x] = idx;
  }
}

}  // namespace

void argmax_rows(const float* x, int rows, int cols, int32_t* out, cudaStream_t s) {
  check(rows >= 0 && cols >= 0, "argmax_rows: negative size");
  if (rows == 0) return;
  argmax_rows_kernel<<<rows, kArgmaxThreads, 0, s>>>(x, cols, out);
  POLYKV_CUDA_LAUNCHED();
}

void rmsnorm(const float* x, const float* w, float* out, int rows, int cols, float eps, cudaStream_t s) {
  check(rows >= 0 && cols >= 0, "rmsnorm: negative size");
  if (rows == 0 || cols == 0) return;
  // gridDim.x allows 2^31 - 1 blocks: one per row always fits an int row count.
  switch (rms::regs_for(cols)) {
    case 8: rmsnorm_kernel<8><<<rows, math::kRmsThreads, 0, s>>>(x, w, out, cols, eps); break;
    case 16: rmsnorm_kernel<16><<<rows, math::kRmsThreads, 0, s>>>(x, w, out, cols, eps); break;
    case 32: rmsnorm_kernel<32><<<rows, math::kRmsThreads, 0, s>>>(x, w, out, cols, eps); break;
    default: rmsnorm_kernel<0><<<rows, math::kRmsThreads, 0, s>>>(x, w, out, cols, eps); break;
  }
  POLYKV_CUDA_LAUNCHED();
}

void add_bias(float* x, const float* b, int rows, int cols, cudaStream_t s) {
  check(rows >= 0 && cols >= 0, "add_bias: negative size");
  const int64_t n = int64_t(rows) * cols;
  if (n == 0) return;
  add_bias_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, b, rows, cols);
  POLYKV_CUDA_LAUNCHED();
}

void add(float* x, const float* y, int64_t n, cudaStream_t s) {
  check(n >= 0, "add: negative size");
  if (n == 0) return;
  add_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, y, n);
  POLYKV_CUDA_LAUNCHED();
}

void rope(float* x, int rows, int n_heads, int head_dim, int n_rot, const int32_t* pos, const float* inv_freq,
          float scale, RopeStyle style, cudaStream_t s) {
  check(rows >= 0 && n_heads >= 0, "rope: negative size");
  check(n_rot >= 0 && n_rot % 2 == 0 && n_rot <= head_dim, "rope: n_rot ", n_rot, " must be even and <= head_dim ",
        head_dim);
  const int64_t n_pairs = int64_t(rows) * n_heads * (n_rot / 2);
  if (n_pairs == 0) return;
  rope_kernel<<<blocks_for(n_pairs), kThreads, 0, s>>>(x, n_pairs, n_heads, head_dim, n_rot, pos, inv_freq, scale,
                                                        style);
  POLYKV_CUDA_LAUNCHED();
}

void gated_activation(float* gate, const float* up, int64_t n, Activation act, cudaStream_t s) {
  check(n >= 0, "gated_activation: negative size");
  if (n == 0) return;
  gated_kernel<<<blocks_for(n), kThreads, 0, s>>>(gate, up, n, act);
  POLYKV_CUDA_LAUNCHED();
}

void softcap(float* x, int64_t n, float cap, cudaStream_t s) {
  check(n >= 0, "softcap: negative size");
  if (n == 0) return;
  softcap_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, n, cap);
  POLYKV_CUDA_LAUNCHED();
}

void gather_rows(const float* src, const int32_t* rows, int n, int cols, float* dst, cudaStream_t s) {
  check(n >= 0 && cols >= 0, "gather_rows: negative size");
  const int64_t total = int64_t(n) * cols;
  if (total == 0) return;
  gather_rows_kernel<<<blocks_for(total), kThreads, 0, s>>>(src, rows, n, cols, dst);
  POLYKV_CUDA_LAUNCHED();
}

}  // namespace polykv::cuda
