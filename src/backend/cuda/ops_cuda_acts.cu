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
#include <cstring>
#include <utility>

#include "backend/cuda/deferred_norm.cuh"
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

// The same row on a cluster of kRmsSlices blocks (sm_90): every block loads the whole row and computes
// its inverse norm exactly as rmsnorm_acts_kernel<J> does (the same threads sum the same squares in the
// same order: the same bits in every block), then writes only its slice, j in [b JS, (b + 1) JS) of
// thread t's values t + kRmsThreads j: x (with r), out and the activations. A cluster barrier between
// the loads and the first store keeps the in-place update (x += r, out aliasing x or r) right: no block
// writes before every block has read. Why: one 256-thread block spent ~5 us a norm (2 a layer) in the
// decode graph, mostly in the 16 blocks of 32 values each warp quantized one after the other (call L1's
// timeline, docs/CUDA_DECODE.md); here each warp quantizes JS = J / kRmsSlices blocks.
constexpr int kRmsSlices = 8;  // the portable cluster size

__device__ __forceinline__ void cluster_arrive() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void cluster_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
#endif
}

template <int J>
__global__ void rmsnorm_acts_cluster_kernel(float* x, const float* r, const float* w, float* out, int cols, float eps,
                                            int8_t* __restrict__ qs, hd::ActScale* __restrict__ sc) {
  static_assert(J % kRmsSlices == 0, "whole slices");
  constexpr int JS = J / kRmsSlices;
  __shared__ double partials[math::kRmsThreads];
  __shared__ float inv;
  const int t = int(threadIdx.x), lane = t % 32, slice = int(blockIdx.x), j0 = slice * JS;
  const int64_t row0 = int64_t(blockIdx.y) * cols;
  float* xr = x + row0;
  float* o = out + row0;
  float wv[JS], v[J];
#pragma unroll
  for (int j = 0; j < JS; ++j) {
    const int i = t + math::kRmsThreads * (j0 + j);
    wv[j] = i < cols ? w[i] : 0.0f;
  }
  wait_for_previous_grid();
  allow_next_grid();
  rms::load_row(xr, r != nullptr ? r + row0 : nullptr, cols, t, v);
  double ssq = 0;  // rms::row_inv's partial: this thread's squares in ascending index
#pragma unroll
  for (int j = 0; j < J; ++j)
    if (t + math::kRmsThreads * j < cols) ssq = math::dadd_rn(ssq, math::dmul_rn(double(v[j]), double(v[j])));
  cluster_arrive();  // this block has read its row (every value above is consumed)
  const float in = rms::row_inv_of_partial(ssq, cols, eps, t, partials, &inv);
  float vs[JS];  // v[j0 ..]: constant indices under a predicate (a runtime index would put v in local memory)
#pragma unroll
  for (int j = 0; j < J; ++j)
    if (j / JS == slice) vs[j % JS] = v[j];
  cluster_wait();  // every block of the row has read it: stores may begin
#pragma unroll
  for (int j = 0; j < JS; ++j) {
    const int i = t + math::kRmsThreads * (j0 + j);
    if (i < cols) {
      if (r != nullptr) xr[i] = vs[j];
      vs[j] = math::rms_out(vs[j], in, wv[j]);
      o[i] = vs[j];
    }
  }
  const int first = t - lane + math::kRmsThreads * j0;  // the warp's first value of the slice
  const int n_blocks =
      first < cols ? min(JS, (cols - first + math::kRmsThreads - 1) / math::kRmsThreads) : 0;
  const int64_t b0 = (row0 + first) / hd::kActBlock;
  quantize_act_blocks_warp<JS>(vs, n_blocks, lane, qs + b0 * hd::kActBlock, sc + b0,
                               math::kRmsThreads / hd::kActBlock);
}

// rmsnorm_defer: warp w of block (bx, row) owns block b = bx * 8 + w of 32 values of the row (kDeferWarps warps
// a block). Its norm weights are read before the PDL wait (they are constants).
constexpr int kDeferWarps = 8;
// The deferred norm's work on block b (of nb) of 32 values of row blockIdx.y (its first value at row0), lane `lane`
// holding v = x[i] after the residual add and the norm weight wv: the block's sum of squares into ss (a warp
// butterfly of doubles) and the activations of v * wv.
__device__ __forceinline__ void defer_block(float v, float wv, int lane, int b, int nb, int64_t row0,
                                            int8_t* __restrict__ qs, hd::ActScale* __restrict__ sc,
                                            double* __restrict__ ss) {
  double q = math::dmul_rn(double(v), double(v));
#pragma unroll
  for (int off = 16; off > 0; off /= 2) q = math::dadd_rn(q, __shfl_xor_sync(0xffffffffu, q, off));
  if (lane == 0) ss[int64_t(blockIdx.y) * nb + b] = q;
  const int64_t fb = row0 / hd::kActBlock + b;  // the flat activation block
  quantize_act_block_warp(math::mul_rn(v, wv), lane, qs + fb * hd::kActBlock, sc + fb);
}

// early: the next kernel may launch before this one's wait (early_allow(), matmul_cuda_internal.h).
__global__ void rmsnorm_defer_kernel(float* x, const float* r, const float* __restrict__ w, int cols,
                                     int8_t* __restrict__ qs, hd::ActScale* __restrict__ sc, double* __restrict__ ss,
                                     int early) {
  const int lane = int(threadIdx.x % 32);
  const int nb = cols / hd::kActBlock;
  const int b = int(blockIdx.x) * kDeferWarps + int(threadIdx.x / 32);
  const bool live = b < nb;  // warp-uniform
  const int i = b * hd::kActBlock + lane;
  const float wv = live ? w[i] : 0.0f;
  if (early) allow_next_grid();
  wait_for_previous_grid();
  if (!early) allow_next_grid();
  if (!live) return;
  const int64_t row0 = int64_t(blockIdx.y) * cols;
  float v = x[row0 + i];
  if (r != nullptr) {
    v = math::add_rn(v, r[row0 + i]);
    x[row0 + i] = v;
  }
  defer_block(v, wv, lane, b, nb, row0, qs, sc, ss);
}

// post_norm_defer: r's post-norm (Gemma's sandwich norms), then rmsnorm_defer_kernel's work on x += that. Every block
// takes the whole row of r into registers and computes its inverse norm with the one-block rmsnorm's threads and
// order (rms_row.cuh, J = regs_for(cols): the bits of rmsnorm_kernel<J> and of the cluster kernel), then warp w
// handles block b = bx * 8 + w of 32 values as rmsnorm_defer_kernel does, with r[i] replaced by
// rms_out(r[i], inv, w_post[i]): the bits of rmsnorm(r, w_post, r) followed by rmsnorm_defer. r is only read.
template <int J>
__global__ void __launch_bounds__(32 * kDeferWarps)
    post_norm_defer_kernel(float* x, const float* r, const float* __restrict__ w_post, const float* __restrict__ w,
                           int cols, float eps, int8_t* __restrict__ qs, hd::ActScale* __restrict__ sc,
                           double* __restrict__ ss, int early) {
  static_assert(32 * kDeferWarps == math::kRmsThreads, "one block of the one-block rmsnorm's threads");
  __shared__ double partials[math::kRmsThreads];
  __shared__ float inv_shared;
  const int t = int(threadIdx.x), lane = t % 32;
  const int nb = cols / hd::kActBlock;
  const int b = int(blockIdx.x) * kDeferWarps + t / 32;
  const bool live = b < nb;  // warp-uniform
  const int i = b * hd::kActBlock + lane;
  const float wv = live ? w[i] : 0.0f, wp = live ? w_post[i] : 0.0f;  // constants: before the PDL wait
  if (early) allow_next_grid();
  wait_for_previous_grid();
  if (!early) allow_next_grid();
  const int64_t row0 = int64_t(blockIdx.y) * cols;
  float rv[J];
  rms::load_row(r + row0, nullptr, cols, t, rv);
  const float inv = rms::row_inv(rv, cols, eps, t, partials, &inv_shared);  // block barriers: every thread
  if (!live) return;
  float v = math::add_rn(x[row0 + i], math::rms_out(r[row0 + i], inv, wp));
  x[row0 + i] = v;
  defer_block(v, wv, lane, b, nb, row0, qs, sc, ss);
}

__global__ void rmsnorm_materialize_kernel(const float* x, const float* __restrict__ w, float* out, int cols, float eps,
                                           const double* ss) {
  const int lane = int(threadIdx.x % 32);
  const int nb = cols / hd::kActBlock;
  const int b = int(blockIdx.x) * kDeferWarps + int(threadIdx.x / 32);
  wait_for_previous_grid();
  allow_next_grid();
  if (b >= nb) return;  // warp-uniform
  const float inv = deferred_inv(ss + int64_t(blockIdx.y) * nb, cols, eps, lane);
  const int64_t i = int64_t(blockIdx.y) * cols + b * hd::kActBlock + lane;
  out[i] = math::rms_out(x[i], inv, w[b * hd::kActBlock + lane]);
}

// Warp-aligned grid stride over n (n % 32 == 0): a warp takes one block of 32 values per step.
// early: as rmsnorm_defer_kernel's (its reader is the down projection's mat-vec).
__global__ void gated_acts_kernel(float* gate, const float* up, int64_t n, Activation act, int8_t* __restrict__ qs,
                                  hd::ActScale* __restrict__ sc, int early) {
  if (early) allow_next_grid();
  wait_for_previous_grid();
  if (!early) allow_next_grid();
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

// POLYKV_CUDA_RMS_CLUSTER=0: the one-block kernel for every norm (A/B); read once.
bool rms_clusters_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("POLYKV_CUDA_RMS_CLUSTER");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return on;
}

// A launch in clusters of kRmsSlices blocks along x, with programmatic dependent launch when pdl.
template <class... KArgs, class... Args>
void launch_cluster(void (*kernel)(KArgs...), dim3 grid, dim3 block, cudaStream_t s, bool pdl, Args&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.stream = s;
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = unsigned(kRmsSlices);
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[1].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 2 : 1;
  POLYKV_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}

}  // namespace

ActsOut fused_acts_buffer(int64_t total, CudaContext& ctx, bool with_ss) {
  check(total > 0 && total % hd::kActBlock == 0, "fused activations: ", total, " values (a multiple of 32 > 0)");
  const size_t qs_bytes = round_up(size_t(total), 256);
  const size_t sc_bytes = round_up(size_t(total / hd::kActBlock) * sizeof(hd::ActScale), 256);
  const size_t ss_bytes = with_ss ? size_t(total / hd::kActBlock) * sizeof(double) : 0;
  auto* buf = static_cast<uint8_t*>(ctx.scratch(Scratch::FusedActs, qs_bytes + sc_bytes + ss_bytes));
  ActsOut o;
  o.qs = reinterpret_cast<int8_t*>(buf);
  o.scales = buf + qs_bytes;
  o.ss = with_ss ? reinterpret_cast<double*>(buf + qs_bytes + sc_bytes) : nullptr;
  return o;
}

void rmsnorm_defer(float* x, const float* r, const float* w, int rows, int cols, ActsOut acts, cudaStream_t s,
                   bool pdl) {
  check(rows >= 0 && acts_fusable(cols), "rmsnorm_defer: ", rows, " rows of ", cols, " (a multiple of 32)");
  check(acts.qs != nullptr && acts.scales != nullptr && acts.ss != nullptr, "rmsnorm_defer: no activation buffer");
  if (rows == 0) return;
  const int nb = cols / int(hd::kActBlock);
  const dim3 grid{unsigned((nb + kDeferWarps - 1) / kDeferWarps), unsigned(rows)}, block{unsigned(32 * kDeferWarps)};
  launch_kernel(rmsnorm_defer_kernel, grid, block, 0, s, pdl, x, r, w, cols, acts.qs,
                static_cast<hd::ActScale*>(acts.scales), acts.ss, early_allow() >= 1 ? 1 : 0);
}

bool post_norm_defer_ok(int cols) { return acts_fusable(cols) && rms::regs_for(cols) > 0; }

void post_norm_defer(float* x, const float* r, const float* w_post, const float* w, int rows, int cols, float eps,
                     ActsOut acts, cudaStream_t s, bool pdl) {
  check(rows >= 0 && post_norm_defer_ok(cols), "post_norm_defer: ", rows, " rows of ", cols,
        " (a multiple of 32, at most ", math::kRmsThreads * 32, ")");
  check(acts.qs != nullptr && acts.scales != nullptr && acts.ss != nullptr, "post_norm_defer: no activation buffer");
  if (rows == 0) return;
  const int nb = cols / int(hd::kActBlock);
  const dim3 grid{unsigned((nb + kDeferWarps - 1) / kDeferWarps), unsigned(rows)}, block{unsigned(32 * kDeferWarps)};
  auto* sc = static_cast<hd::ActScale*>(acts.scales);
  const int early = early_allow() >= 1 ? 1 : 0;
  switch (rms::regs_for(cols)) {
    case 8:
      return launch_kernel(post_norm_defer_kernel<8>, grid, block, 0, s, pdl, x, r, w_post, w, cols, eps, acts.qs, sc,
                           acts.ss, early);
    case 16:
      return launch_kernel(post_norm_defer_kernel<16>, grid, block, 0, s, pdl, x, r, w_post, w, cols, eps, acts.qs,
                           sc, acts.ss, early);
    default:
      return launch_kernel(post_norm_defer_kernel<32>, grid, block, 0, s, pdl, x, r, w_post, w, cols, eps, acts.qs,
                           sc, acts.ss, early);
  }
}

void rmsnorm_materialize(const float* x, const float* w, float* out, int rows, int cols, float eps, const double* ss,
                         cudaStream_t s, bool pdl) {
  check(rows >= 0 && acts_fusable(cols) && ss != nullptr, "rmsnorm_materialize: ", rows, " rows of ", cols);
  if (rows == 0) return;
  const int nb = cols / int(hd::kActBlock);
  const dim3 grid{unsigned((nb + kDeferWarps - 1) / kDeferWarps), unsigned(rows)}, block{unsigned(32 * kDeferWarps)};
  launch_kernel(rmsnorm_materialize_kernel, grid, block, 0, s, pdl, x, w, out, cols, eps, ss);
}

void rmsnorm_acts(float* x, const float* r, const float* w, float* out, int rows, int cols, float eps, ActsOut acts,
                  cudaStream_t s, bool pdl, bool clusters) {
  check(rows >= 0 && acts_fusable(cols), "rmsnorm_acts: ", rows, " rows of ", cols, " (a multiple of 32)");
  check(acts.qs != nullptr && acts.scales != nullptr, "rmsnorm_acts: no activation buffer");
  if (rows == 0) return;
  auto* sc = static_cast<hd::ActScale*>(acts.scales);
  const int regs = rms::regs_for(cols);
  if (clusters && regs > 0 && rms_clusters_enabled()) {
    const dim3 grid{unsigned(kRmsSlices), unsigned(rows)}, block{unsigned(math::kRmsThreads)};
    switch (regs) {
      case 8: return launch_cluster(rmsnorm_acts_cluster_kernel<8>, grid, block, s, pdl, x, r, w, out, cols, eps, acts.qs, sc);
      case 16: return launch_cluster(rmsnorm_acts_cluster_kernel<16>, grid, block, s, pdl, x, r, w, out, cols, eps, acts.qs, sc);
      default: return launch_cluster(rmsnorm_acts_cluster_kernel<32>, grid, block, s, pdl, x, r, w, out, cols, eps, acts.qs, sc);
    }
  }
  const dim3 grid{unsigned(rows)}, block{unsigned(math::kRmsThreads)};
  switch (regs) {
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
                static_cast<hd::ActScale*>(acts.scales), early_allow() >= 2 ? 1 : 0);
}

}  // namespace polykv::cuda
