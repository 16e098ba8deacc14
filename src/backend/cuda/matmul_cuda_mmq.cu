// The quantized mat-mul on tensor cores ("mmq", docs/CUDA_MMQ.md): its switches, routing and entry
// points; the kernel is matmul_cuda_mmq2.cu (fragments: matmul_cuda_mmq.cuh, mma_fragments.cuh). Weights
// in the split layout, 9..POLYKV_CUDA_MMQ_MAX columns, each weight byte read once per 64 columns and
// dequantized in registers to f16, mma.sync m16n8k16 with f32 accumulation.
//
// Bytes and flops (llama-3.1-8b q4_0, 4096 x 4096, n = 64; docs/CUDA_MMQ.md has every shape):
//   weights 9.44 MB (read once) + x as f16 0.5 MB (read by every thread block from L2) + y 1 MB (+ the
//   K-split partials, from L2); floor = 9.44 MB / 4.3 TB/s = 2.2 us. Flops 2 x 4096 x 4096 x 64 = 2.1
//   GFLOP = 524288 mma's of m16n8k16.
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "backend/cuda/matmul_cuda.h"
#include "backend/cuda/matmul_cuda_internal.h"
#include "backend/cuda/matmul_cuda_mmq_stage.cuh"
#include "backend/cuda/matmul_cuda_mmq2.h"
#include "backend/cuda/matmul_cuda_split.h"
#include "core/error.h"

namespace polykv::cuda {
namespace {

__global__ void mmq_to_f16_kernel(const float* __restrict__ x, int64_t total, __half* __restrict__ out) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = __float2half_rn(x[i]);
}

// The wgmma kernel's permuted x (matmul_cuda_mmq_stage.cuh, mmq3_x_source): out[i] for i < total.
template <class T>
__global__ void mmq3_to_f16_kernel(const float* __restrict__ x, int64_t n_in, hd::SplitGeom geom, int ncols,
                                   int64_t total, __half* __restrict__ out) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    int col = 0;
    const int64_t src = hd::mmq3_x_source<T>(geom, ncols, i, col);
    out[i] = src < 0 ? __float2half_rn(0.0f) : __float2half_rn(x[int64_t(col) * n_in + src]);
  }
}

unsigned grid_stride_blocks(int64_t total, int threads) {
  return unsigned(std::clamp<int64_t>((total + threads - 1) / threads, 1, 65535));
}

// Switches (POLYKV_CUDA_MMQ=0, POLYKV_CUDA_MMQ_MIN / _MAX / _SPLITS), read once.
struct MmqSettings {
  bool read = false;
  bool on = true;
  int min_cols = kMmqDefaultMinCols, max_cols = kMmqDefaultMaxCols, splits = 0;
  bool wgmma = true;
  bool fuse = true;
  int env_min = kMmqDefaultMinCols, env_max = kMmqDefaultMaxCols, env_splits = 0;  // what the environment set
};
MmqSettings g_mmq;

int env_int(const char* name, int fallback) {
  const char* e = std::getenv(name);
  if (!e || !*e) return fallback;
  char* end = nullptr;
  const long v = std::strtol(e, &end, 10);
  return (end && *end == '\0') ? int(v) : fallback;
}

MmqSettings& settings() {
  if (!g_mmq.read) {
    g_mmq.read = true;
    const char* e = std::getenv("POLYKV_CUDA_MMQ");
    g_mmq.on = !(e && std::strcmp(e, "0") == 0);
    g_mmq.min_cols = std::max(1, env_int("POLYKV_CUDA_MMQ_MIN", kMmqDefaultMinCols));
    g_mmq.max_cols = env_int("POLYKV_CUDA_MMQ_MAX", kMmqDefaultMaxCols);
    g_mmq.splits = std::clamp(env_int("POLYKV_CUDA_MMQ_SPLITS", 0), 0, hd::kMmq2MaxSplits);
    const char* wg = std::getenv("POLYKV_CUDA_MMQ_WGMMA");
    g_mmq.wgmma = !(wg && std::strcmp(wg, "0") == 0);
    const char* fu = std::getenv("POLYKV_CUDA_MMQ_FUSE");
    g_mmq.fuse = !(fu && std::strcmp(fu, "0") == 0);
    g_mmq.env_min = g_mmq.min_cols;
    g_mmq.env_max = g_mmq.max_cols;
    g_mmq.env_splits = g_mmq.splits;
  }
  return g_mmq;
}

// The current device's opt-in shared memory per block, read once per device. The kernel's largest
// instance needs up to 192 KB (hd::mmq2_smem_bytes, q8_0 at 4 n tiles): an H100 / H200 (227 KB) holds
// every type, an A100 (163 KB) or sm_86 / sm_89 (99 KB) not all; those matrices keep the old paths
// (mmq_supports), where the kernel's launch would fail.
int device_smem_optin() {
  static std::mutex mu;
  static std::vector<int> per_device;
  int dev = 0;
  POLYKV_CUDA_CHECK(cudaGetDevice(&dev));
  const std::lock_guard<std::mutex> lock(mu);
  if (size_t(dev) >= per_device.size()) per_device.resize(size_t(dev) + 1, -1);
  if (per_device[size_t(dev)] < 0) {
    int v = 0;
    POLYKV_CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    per_device[size_t(dev)] = v;
  }
  return per_device[size_t(dev)];
}

}  // namespace

bool mmq_enabled() { return settings().on; }
int mmq_min_cols() { return settings().min_cols; }
int mmq_max_cols() { return settings().max_cols; }

void set_mmq(bool on, int min_cols, int max_cols, int splits) {
  MmqSettings& m = settings();
  m.on = on;
  m.min_cols = min_cols > 0 ? min_cols : m.env_min;
  m.max_cols = max_cols > 0 ? max_cols : m.env_max;
  m.splits = splits > 0 ? std::min(splits, hd::kMmq2MaxSplits) : m.env_splits;
}

bool mmq_supports(const WeightMatrix& w) {
  bool ok = false;
  if (w.layout == WeightLayout::CudaSplit)
    hd::visit_split_decoder(w.type, [&](auto dec) {
      using T = decltype(dec);
      if constexpr (hd::mmq_type<T>()) {
        // Every instance (1, 2, 4, 8 n tiles) takes its shared memory at the first launch.
        const int need = std::max(std::max(hd::mmq2_smem_bytes<T>(1), hd::mmq2_smem_bytes<T>(2)),
                                  std::max(hd::mmq2_smem_bytes<T>(4), hd::mmq2_smem_bytes<T>(8)));
        ok = need <= device_smem_optin();
      }
    });
  return ok && w.n_in % hd::kActBlock == 0;
}

bool mmq_takes(const WeightMatrix& w, int n) {
  const MmqSettings& m = settings();
  return m.on && n >= m.min_cols && n <= m.max_cols && n >= 1 && mmq_supports(w);
}

void set_mmq_wgmma(bool on) { settings().wgmma = on; }

bool mmq_wgmma_takes(const WeightMatrix& w, const CudaContext& ctx) {
#ifdef POLYKV_CUDA_SM90A
  if (!settings().wgmma || ctx.cc_major() != 9 || ctx.cc_minor() != 0 || w.layout != WeightLayout::CudaSplit)
    return false;
  bool ok = false;
  hd::visit_split_decoder(w.type, [&](auto dec) {
    using T = decltype(dec);
    if constexpr (hd::mmq_type<T>()) ok = hd::mmq3_smem_bytes<T>(8) <= device_smem_optin();
  });
  return ok;
#else
  (void)w;
  (void)ctx;
  return false;
#endif
}

const void* mmq_prepare_x(const float* x, int64_t n_in, int n, CudaContext& ctx) {
  const int64_t total = int64_t(n) * n_in;
  __half* x16 = static_cast<__half*>(ctx.scratch(Scratch::MatmulActs, size_t(total) * sizeof(__half)));
  mmq_to_f16_kernel<<<grid_stride_blocks(total, 256), 256, 0, ctx.stream()>>>(x, total, x16);
  POLYKV_CUDA_LAUNCHED();
  return x16;
}

MmqActs mmq_prepare_acts(const WeightMatrix& w, const float* x, int n, CudaContext& ctx) {
  MmqActs acts;
  acts.n_in = w.n_in;
  acts.n = n;
  if (!mmq_wgmma_takes(w, ctx)) {
    acts.x16 = mmq_prepare_x(x, w.n_in, n, ctx);
    return acts;
  }
  acts.order = int(w.type);
  hd::visit_split_decoder(w.type, [&](auto dec) {
    using T = decltype(dec);
    if constexpr (hd::mmq_type<T>()) {
      const hd::SplitGeom geom = hd::split_geom<T>(w.n_in);
      const int64_t total = hd::mmq3_x_halves(geom.n_units, n);
      __half* xw = static_cast<__half*>(ctx.scratch(Scratch::MatmulActs, size_t(total) * sizeof(__half)));
      mmq3_to_f16_kernel<T><<<grid_stride_blocks(total, 256), 256, 0, ctx.stream()>>>(x, w.n_in, geom, n, total, xw);
      POLYKV_CUDA_LAUNCHED();
      acts.x16 = xw;
    }
  });
  return acts;
}

bool mmq_acts_fit(const MmqActs& acts, const WeightMatrix& w, int n, const CudaContext& ctx) {
  const int order = mmq_wgmma_takes(w, ctx) ? int(w.type) : -1;
  return acts.x16 != nullptr && acts.n_in == w.n_in && acts.n == n && acts.order == order;
}

void mmq_launch(const WeightMatrix& w, const MmqActs& acts, float* y, int n, CudaContext& ctx) {
  check(mmq_supports(w), "CUDA mmq: ", dtype_name(w.type), " weights (layout ", int(w.layout), ") not supported");
  check(n >= 1, "CUDA mmq: ", n, " columns");
  check(mmq_acts_fit(acts, w, n, ctx), "CUDA mmq: activations prepared for another kernel or shape");
  if (w.n_out == 0) return;
  const __half* x16 = static_cast<const __half*>(acts.x16);
#ifdef POLYKV_CUDA_SM90A
  if (acts.order >= 0) {
    mmq3_launch(w, x16, y, n, ctx, settings().splits);
    return;
  }
#endif
  mmq2_launch(w, x16, y, n, ctx, settings().splits);
}

bool mmq_launch_fused(std::span<const MatvecPart> parts, const float* x, int n, CudaContext& ctx) {
#ifdef POLYKV_CUDA_SM90A
  if (!settings().fuse || parts.size() < 2 || parts.size() > size_t(kMaxMatvecParts)) return false;
  const WeightMatrix& w0 = *parts[0].w;
  for (const MatvecPart& p : parts) {
    if (!mmq_supports(*p.w) || !mmq_wgmma_takes(*p.w, ctx) || p.w->type != w0.type || p.w->n_in != w0.n_in ||
        p.w->row_stride != w0.row_stride)
      return false;
  }
  check(n >= 1, "CUDA mmq: ", n, " columns");
  const MmqActs acts = mmq_prepare_acts(w0, x, n, ctx);
  mmq3_launch_parts(parts, static_cast<const __half*>(acts.x16), n, ctx, settings().splits);
  return true;
#else
  (void)parts;
  (void)x;
  (void)n;
  (void)ctx;
  return false;
#endif
}

void matmul_mmq(const WeightMatrix& w, const float* x, float* y, int n, CudaContext& ctx) {
  validate_device_weights(w);
  if (n == 0 || w.n_out == 0) return;
  mmq_launch(w, mmq_prepare_acts(w, x, n, ctx), y, n, ctx);
}

}  // namespace polykv::cuda
