// Fused decoder ops (ops_cuda_fused.h). Each thread does exactly what it would do in the plain
// kernels of ops_cuda.cu (same elements, same operations, same order).
#include "backend/cuda/ops_cuda_fused.h"

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/matmul_cuda_launch.cuh"
#include "backend/cuda/ops_cuda_math.cuh"
#include "backend/cuda/rms_row.cuh"
#include "core/error.h"

namespace polykv::cuda {
namespace {

// One block per row. J > 0: the row in registers (rms_row.cuh), J values per thread; J = 0 (rows
// longer than kRmsThreads * 32): thread t first adds r into x at its own indices i = t, t +
// kRmsThreads, ... (the indices rms_partial then reads and the final loop writes). Either way out may
// alias r: every r[i] a thread reads precedes its own write of out[i], and no other thread touches i.
template <int J>
__global__ void add_rmsnorm_kernel(float* x, const float* r, const float* w, float* out, int cols, float eps) {
  __shared__ double partials[math::kRmsThreads];
  __shared__ float inv;
  const int t = int(threadIdx.x);
  float* xr = x + int64_t(blockIdx.x) * cols;
  const float* rr = r + int64_t(blockIdx.x) * cols;
  float* o = out + int64_t(blockIdx.x) * cols;
  if constexpr (J > 0) {
    float wv[J], v[J];
    rms::load_weights(w, cols, t, wv);  // weights: never written by the kernel before (PDL)
    wait_for_previous_grid();
    allow_next_grid();
    rms::load_row(xr, rr, cols, t, v);
    rms::store_row(xr, cols, t, v);
    const float in = rms::row_inv(v, cols, eps, t, partials, &inv);
#pragma unroll
    for (int j = 0; j < J; ++j) v[j] = math::rms_out(v[j], in, wv[j]);
    rms::store_row(o, cols, t, v);
  } else {
    wait_for_previous_grid();  // launched with PDL: before any access
    allow_next_grid();
    for (int i = t; i < cols; i += math::kRmsThreads) xr[i] = math::add_rn(xr[i], rr[i]);
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

// Flat index i < n_q: pair i of q (as rope_kernel on q); else pair i - n_q of k.
__global__ void rope_qk_kernel(float* q, int64_t n_q, int n_head, float* k, int64_t n_k, int n_head_kv,
                               int head_dim, int n_rot, const int32_t* pos, const float* inv_freq, float scale,
                               RopeStyle style) {
  wait_for_previous_grid();  // launched with PDL: before any access
  allow_next_grid();
  const int64_t n = n_q + n_k;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    if (i < n_q)
      math::rope_pair(q, i, n_head, head_dim, n_rot, pos, inv_freq, scale, style);
    else
      math::rope_pair(k, i - n_q, n_head_kv, head_dim, n_rot, pos, inv_freq, scale, style);
  }
}

// One block per head row: blocks [0, q_rows) take q's heads (rows * n_head of them), the others k's. The head's
// rmsnorm is rmsnorm_kernel<8>'s (the one-block kernel of every row of <= kRmsThreads * 8 values: the same loads,
// sums and tree), its outputs go to shared memory, and the pairs are rotated there with rope_pair's operations
// (pair i < n_rot / 2 of the head, at the row's position) before the head is stored back: the bits of rmsnorm of
// q, rmsnorm of k, then rope_qk.
constexpr int kHeadRegs = 8;
__global__ void __launch_bounds__(math::kRmsThreads)
    qk_norm_rope_kernel(float* q, const float* q_norm, int64_t q_rows, int n_head, float* k, const float* k_norm,
                        int n_head_kv, int head_dim, float eps, int n_rot, const int32_t* pos, const float* inv_freq,
                        float scale, RopeStyle style) {
  __shared__ double partials[math::kRmsThreads];
  __shared__ float inv;
  __shared__ float head[math::kRmsThreads * kHeadRegs];  // [head_dim]: the normed head, rotated in place
  const int t = int(threadIdx.x);
  const int64_t b = blockIdx.x;
  const bool is_q = b < q_rows;
  const int64_t hr = is_q ? b : b - q_rows;  // the head's row in q ([rows * n_head]) or k ([rows * n_head_kv])
  const int64_t row = hr / (is_q ? n_head : n_head_kv);
  float* x = (is_q ? q : k) + hr * head_dim;
  float wv[kHeadRegs], v[kHeadRegs];
  rms::load_weights(is_q ? q_norm : k_norm, head_dim, t, wv);  // weights: never written by the kernel before (PDL)
  wait_for_previous_grid();  // launched with PDL: before any access to q, k or the step's positions
  allow_next_grid();
  rms::load_row(x, nullptr, head_dim, t, v);
  const float in = rms::row_inv(v, head_dim, eps, t, partials, &inv);
#pragma unroll
  for (int j = 0; j < kHeadRegs; ++j) {
    const int i = t + math::kRmsThreads * j;
    if (i < head_dim) head[i] = math::rms_out(v[j], in, wv[j]);
  }
  __syncthreads();
  const int p = pos[row];
  for (int i = t; i < n_rot / 2; i += math::kRmsThreads) {
    const float angle = math::rope_angle(p, scale, inv_freq[i]);
    int da = 0, db = 0;
    math::rope_dims(i, n_rot, style, da, db);
    math::rope_rotate(head, da, db, cosf(angle), sinf(angle));
  }
  __syncthreads();
  for (int i = t; i < head_dim; i += math::kRmsThreads) x[i] = head[i];
}

}  // namespace

bool qk_norm_rope_ok(int head_dim) { return head_dim > 0 && head_dim <= math::kRmsThreads * kHeadRegs; }

void qk_norm_rope(float* q, const float* q_norm, int n_head, float* k, const float* k_norm, int n_head_kv, int rows,
                  int head_dim, float eps, int n_rot, const int32_t* pos, const float* inv_freq, float scale,
                  RopeStyle style, cudaStream_t s, bool pdl) {
  check(rows >= 0 && n_head >= 0 && n_head_kv >= 0, "qk_norm_rope: negative size");
  check(qk_norm_rope_ok(head_dim), "qk_norm_rope: head_dim ", head_dim, " outside [1, ",
        math::kRmsThreads * kHeadRegs, "]");
  check(n_rot >= 0 && n_rot % 2 == 0 && n_rot <= head_dim, "qk_norm_rope: n_rot ", n_rot,
        " must be even and <= head_dim ", head_dim);
  const int64_t q_rows = int64_t(rows) * n_head, blocks = q_rows + int64_t(rows) * n_head_kv;
  if (blocks == 0) return;
  check(blocks < (int64_t(1) << 31), "qk_norm_rope: ", blocks, " heads exceed the grid");
  launch_kernel(qk_norm_rope_kernel, dim3(unsigned(blocks)), dim3(unsigned(math::kRmsThreads)), 0, s, pdl, q, q_norm,
                q_rows, n_head, k, k_norm, n_head_kv, head_dim, eps, n_rot, pos, inv_freq, scale, style);
}

void add_rmsnorm(float* x, const float* r, const float* w, float* out, int rows, int cols, float eps,
                 cudaStream_t s, bool pdl) {
  check(rows >= 0 && cols >= 0, "add_rmsnorm: negative size");
  if (rows == 0 || cols == 0) return;
  const dim3 grid{unsigned(rows)}, block{unsigned(math::kRmsThreads)};
  switch (rms::regs_for(cols)) {
    case 8: return launch_kernel(add_rmsnorm_kernel<8>, grid, block, 0, s, pdl, x, r, w, out, cols, eps);
    case 16: return launch_kernel(add_rmsnorm_kernel<16>, grid, block, 0, s, pdl, x, r, w, out, cols, eps);
    case 32: return launch_kernel(add_rmsnorm_kernel<32>, grid, block, 0, s, pdl, x, r, w, out, cols, eps);
    default: return launch_kernel(add_rmsnorm_kernel<0>, grid, block, 0, s, pdl, x, r, w, out, cols, eps);
  }
}

void rope_qk(float* q, int n_head, float* k, int n_head_kv, int rows, int head_dim, int n_rot, const int32_t* pos,
             const float* inv_freq, float scale, RopeStyle style, cudaStream_t s, bool pdl) {
  check(rows >= 0 && n_head >= 0 && n_head_kv >= 0, "rope_qk: negative size");
  check(n_rot >= 0 && n_rot % 2 == 0 && n_rot <= head_dim, "rope_qk: n_rot ", n_rot,
        " must be even and <= head_dim ", head_dim);
  const int64_t n_q = int64_t(rows) * n_head * (n_rot / 2), n_k = int64_t(rows) * n_head_kv * (n_rot / 2);
  if (n_q + n_k == 0) return;
  constexpr int kThreads = 256;
  const int blocks = int(std::min<int64_t>((n_q + n_k + kThreads - 1) / kThreads, int64_t(1) << 16));
  launch_kernel(rope_qk_kernel, dim3(unsigned(blocks)), dim3(kThreads), 0, s, pdl, q, n_q, n_head, k, n_k, n_head_kv,
                head_dim, n_rot, pos, inv_freq, scale, style);
}

}  // namespace polykv::cuda
