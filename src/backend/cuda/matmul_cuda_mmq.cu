// The quantized mat-mul on tensor cores ("mmq", matmul_cuda_mmq.cuh says how the fragments are
// built): weights in the split layout, 9..POLYKV_CUDA_MMQ_MAX columns, each weight byte read once per
// 64 columns and dequantized in registers to f16, mma.sync m16n8k16 with f32 accumulation.
//
// Bytes and flops (llama-3.1-8b q4_0, 4096 x 4096, n = 64; docs/CUDA_MMQ.md has every shape):
//   weights 9.44 MB (read once) + x as f16 0.5 MB (read by every thread block: ~16 MB from L2 over
//   the 32 row blocks) + y 1 MB (+ the K-split partials: splits x 1 MB written and read, from L2);
//   floor = 9.44 MB / 4.3 TB/s = 2.2 us. Flops 2 x 4096 x 4096 x 64 = 2.1 GFLOP = 524288 mma's of
//   m16n8k16: ~3.3 us at the ~330 T MAC/s that mma.sync sustains on an H200, so n = 64 is
//   tensor-bound at ~1.5x the floor and n <= 32 memory-bound. The old path (f16 tiles + cuBLAS) moved
//   9.44 MB + 2 x 33.5 MB of f16 tiles.
//
// One thread block = 4 warps = 128 rows, one range of K chunks (grid y: the K split of
// hd::mmq_plan); each warp loads the next chunk's units (16-32 bytes per row and thread) while it
// multiplies the current one. With one split the block writes y; with more it writes its partial
// sums and mmq_reduce_kernel adds them in split order.
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/matmul_cuda.h"
#include "backend/cuda/matmul_cuda_internal.h"
#include "backend/cuda/matmul_cuda_mmq.cuh"
#include "backend/cuda/matmul_cuda_mmq2.h"
#include "backend/cuda/matmul_cuda_split.h"
#include "core/error.h"

namespace polykv::cuda {
namespace {

constexpr int kThreads = 32 * hd::kMmqWarps;

struct MmqArgs {
  const uint8_t* w;   // split rows
  size_t stride;
  hd::SplitGeom geom;
  int64_t n_out, n_in;
  const __half* x;    // [ncols][n_in], the launch's first column
  int ncols;          // 1..kMmqMaxCols
  float* out;         // [splits][ncols][n_out] partials, or y [ncols][n_out] (one split)
  int64_t chunks_per_split, n_chunks;
};

__device__ __forceinline__ uint32_t pack_half2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// d += a * b, m16n8k16, f16 inputs, f32 accumulators.
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <class T, int NR>
struct RowUnits {
  uint32_t q[NR][hd::Split<T>::kUnitWords];
  uint32_t h[NR][hd::Split<T>::kHeadWords];
};

// Unit u of the thread's NR rows (zeros past the row's last unit).
template <class T, int NR>
__device__ __forceinline__ void load_units(const uint8_t* const (&rows)[NR], const hd::SplitGeom& geom, int64_t u,
                                           RowUnits<T, NR>& r) {
  using S = hd::Split<T>;
#pragma unroll
  for (int i = 0; i < NR; ++i) {
    if (u < geom.n_units) {
      hd::split_load_unit<T>(rows[i], geom, u, r.q[i], r.h[i]);
    } else {
#pragma unroll
      for (int k = 0; k < S::kUnitWords; ++k) r.q[i][k] = 0;
#pragma unroll
      for (int k = 0; k < S::kHeadWords; ++k) r.h[i][k] = 0;
    }
  }
}

// MT m16 tiles per warp, NT n8 tiles.
template <class T, int MT, int NT>
__global__ void __launch_bounds__(kThreads) mmq_kernel(const MmqArgs a) {
  using S = hd::Split<T>;
  constexpr int NR = 2 * MT;  // rows per thread
  const int lane = int(threadIdx.x % 32), warp = int(threadIdx.x / 32);
  const int g = lane / 4, t = lane % 4;
  const int64_t row_base =
      int64_t(blockIdx.x) * hd::mmq_rows_per_block(MT) + int64_t(warp) * hd::mmq_rows_per_warp(MT);
  if (row_base >= a.n_out) return;  // the whole warp
  // Row i of the thread: row_base + 8 i + g (m tile i / 2; i % 2: the fragment's upper 8 rows).
  const uint8_t* rows[NR];
#pragma unroll
  for (int i = 0; i < NR; ++i) rows[i] = a.w + size_t(min(row_base + 8 * i + g, a.n_out - 1)) * a.stride;
  // Column g of n tile nt (extra columns repeat the last one; they are not stored).
  const __half* xcol[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) xcol[nt] = a.x + int64_t(min(8 * nt + g, a.ncols - 1)) * a.n_in;

  const int64_t c_begin = int64_t(blockIdx.y) * a.chunks_per_split;
  const int64_t c_end = min(c_begin + a.chunks_per_split, a.n_chunks);
  float acc[MT][NT][4] = {};
  RowUnits<T, NR> cur;
  load_units<T, NR>(rows, a.geom, hd::kMmqUnitsPerChunk * c_begin + t, cur);
  for (int64_t c = c_begin; c < c_end; ++c) {
    const int64_t u = hd::kMmqUnitsPerChunk * c + t;  // this thread's unit
    const bool has = u < a.geom.n_units;
    const int64_t blk = u / T::kParts;
    const int part = int(u % T::kParts);
    typename T::Unit wu[NR];
#pragma unroll
    for (int i = 0; i < NR; ++i) S::decode(cur.q[i], cur.h[i], part, wu[i]);
    if (c + 1 < c_end) load_units<T, NR>(rows, a.geom, u + hd::kMmqUnitsPerChunk, cur);  // the next chunk, in flight
#pragma unroll
    for (int j = 0; j < hd::kMmqStepsPerChunk; ++j) {
      const int64_t pos = hd::mmq_value_pos<T>(blk, part, j, 0);
      uint32_t b[NT][2];
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        if (has) {
          const uint2 v = __ldg(reinterpret_cast<const uint2*>(xcol[nt] + pos));
          b[nt][0] = v.x;
          b[nt][1] = v.y;
        } else {
          b[nt][0] = b[nt][1] = 0;
        }
      }
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        float lo[4], hi[4];
        hd::unit_word_values(wu[2 * mt], j, lo);
        hd::unit_word_values(wu[2 * mt + 1], j, hi);
        uint32_t af[4];
        af[0] = has ? pack_half2(lo[0], lo[1]) : 0u;
        af[1] = has ? pack_half2(hi[0], hi[1]) : 0u;
        af[2] = has ? pack_half2(lo[2], lo[3]) : 0u;
        af[3] = has ? pack_half2(hi[2], hi[3]) : 0u;
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) mma_16816(acc[mt][nt], af, b[nt][0], b[nt][1]);
      }
    }
  }
  float* out = a.out + int64_t(blockIdx.y) * a.ncols * a.n_out;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int64_t row = row_base + 16 * mt + g + 8 * (k / 2);
        const int col = 8 * nt + 2 * t + k % 2;
        if (row < a.n_out && col < a.ncols) out[int64_t(col) * a.n_out + row] = acc[mt][nt][k];
      }
    }
  }
}

// y[i] = partial[0][i] + partial[1][i] + ... in split order; i < total (= ncols x n_out).
__global__ void mmq_reduce_kernel(const float* __restrict__ partial, int splits, int64_t total, float* __restrict__ y) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    float v = partial[i];
    for (int s = 1; s < splits; ++s) v = __fadd_rn(v, partial[int64_t(s) * total + i]);
    y[i] = v;
  }
}

__global__ void mmq_to_f16_kernel(const float* __restrict__ x, int64_t total, __half* __restrict__ out) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = __float2half_rn(x[i]);
}

unsigned grid_stride_blocks(int64_t total, int threads) {
  return unsigned(std::clamp<int64_t>((total + threads - 1) / threads, 1, 65535));
}

// Switches (POLYKV_CUDA_MMQ=0, POLYKV_CUDA_MMQ_MIN / _MAX / _SPLITS), read once.
struct MmqSettings {
  bool read = false;
  bool on = true;
  int min_cols = kMmqDefaultMinCols, max_cols = kMmqDefaultMaxCols, splits = 0;
  int tiles = hd::kMmqDefaultTiles;  // m16 tiles per warp
  int kernel = kMmqDefaultKernel;     // 1: v1 (this file), 2: v2, 3: v2 + f16 dequant, 4: v3 with 16 warps (mmq2.cu)
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
    g_mmq.splits = std::clamp(env_int("POLYKV_CUDA_MMQ_SPLITS", 0), 0, hd::kMmqMaxSplits);
    g_mmq.tiles = env_int("POLYKV_CUDA_MMQ_MT", hd::kMmqDefaultTiles) == 1 ? 1 : 2;
    if (const char* k = std::getenv("POLYKV_CUDA_MMQ_KERNEL")) {
      if (std::strcmp(k, "v1") == 0 || std::strcmp(k, "1") == 0) g_mmq.kernel = 1;
      if (std::strcmp(k, "v2") == 0 || std::strcmp(k, "2") == 0) g_mmq.kernel = 2;
      if (std::strcmp(k, "v3") == 0 || std::strcmp(k, "3") == 0) g_mmq.kernel = 3;
      if (std::strcmp(k, "v4") == 0 || std::strcmp(k, "4") == 0) g_mmq.kernel = 4;
    }
    g_mmq.env_min = g_mmq.min_cols;
    g_mmq.env_max = g_mmq.max_cols;
    g_mmq.env_splits = g_mmq.splits;
  }
  return g_mmq;
}

template <class T, int MT>
void launch_mmq_type(const WeightMatrix& w, const __half* x16, float* y, int n, CudaContext& ctx) {
  const hd::SplitGeom geom = hd::split_geom<T>(w.n_in);
  const hd::MmqPlan plan =
      hd::mmq_plan(w.n_out, geom.n_units, ctx.sm_count(), settings().splits, hd::mmq_rows_per_block(MT));
  const cudaStream_t s = ctx.stream();
  for (int c0 = 0; c0 < n; c0 += hd::kMmqMaxCols) {
    const int ncols = std::min(hd::kMmqMaxCols, n - c0);
    const int64_t total = int64_t(ncols) * w.n_out;
    float* yc = y + int64_t(c0) * w.n_out;
    MmqArgs a{};
    a.w = static_cast<const uint8_t*>(w.data);
    a.stride = w.row_stride;
    a.geom = geom;
    a.n_out = w.n_out;
    a.n_in = w.n_in;
    a.x = x16 + int64_t(c0) * w.n_in;
    a.ncols = ncols;
    a.out = plan.splits > 1
                ? static_cast<float*>(ctx.scratch(Scratch::MatmulWeights, size_t(plan.splits) * size_t(total) * 4))
                : yc;
    a.chunks_per_split = plan.chunks_per_split;
    a.n_chunks = plan.n_chunks;
    const dim3 grid(unsigned(plan.row_blocks), unsigned(plan.splits));
    switch (hd::mmq_tiles(ncols)) {
      case 1: mmq_kernel<T, MT, 1><<<grid, kThreads, 0, s>>>(a); break;
      case 2: mmq_kernel<T, MT, 2><<<grid, kThreads, 0, s>>>(a); break;
      case 4: mmq_kernel<T, MT, 4><<<grid, kThreads, 0, s>>>(a); break;
      default: mmq_kernel<T, MT, 8><<<grid, kThreads, 0, s>>>(a); break;
    }
    POLYKV_CUDA_LAUNCHED();
    if (plan.splits > 1) {
      mmq_reduce_kernel<<<grid_stride_blocks(total, 256), 256, 0, s>>>(a.out, plan.splits, total, yc);
      POLYKV_CUDA_LAUNCHED();
    }
  }
}

}  // namespace

bool mmq_enabled() { return settings().on; }
int mmq_min_cols() { return settings().min_cols; }
int mmq_max_cols() { return settings().max_cols; }

void set_mmq_tiles(int mt) { settings().tiles = mt == 1 ? 1 : 2; }
void set_mmq_kernel(int k) { settings().kernel = k >= 2 && k <= 4 ? k : 1; }
int mmq_kernel() { return settings().kernel; }
int mmq_tiles_per_warp() { return settings().tiles; }

void set_mmq(bool on, int min_cols, int max_cols, int splits) {
  MmqSettings& m = settings();
  m.on = on;
  m.min_cols = min_cols > 0 ? min_cols : m.env_min;
  m.max_cols = max_cols > 0 ? max_cols : m.env_max;
  m.splits = splits > 0 ? std::min(splits, hd::kMmqMaxSplits) : m.env_splits;
}

bool mmq_supports(const WeightMatrix& w) {
  bool ok = false;
  if (w.layout == WeightLayout::CudaSplit)
    hd::visit_split_decoder(w.type, [&](auto dec) { ok = hd::mmq_type<decltype(dec)>(); });
  return ok && w.n_in % hd::kActBlock == 0;
}

bool mmq_takes(const WeightMatrix& w, int n) {
  const MmqSettings& m = settings();
  return m.on && n >= m.min_cols && n <= m.max_cols && n >= 1 && mmq_supports(w);
}

const void* mmq_prepare_x(const float* x, int64_t n_in, int n, CudaContext& ctx) {
  const int64_t total = int64_t(n) * n_in;
  __half* x16 = static_cast<__half*>(ctx.scratch(Scratch::MatmulActs, size_t(total) * sizeof(__half)));
  mmq_to_f16_kernel<<<grid_stride_blocks(total, 256), 256, 0, ctx.stream()>>>(x, total, x16);
  POLYKV_CUDA_LAUNCHED();
  return x16;
}

void mmq_launch(const WeightMatrix& w, const void* x16, float* y, int n, CudaContext& ctx) {
  check(mmq_supports(w), "CUDA mmq: ", dtype_name(w.type), " weights (layout ", int(w.layout), ") not supported");
  check(n >= 1, "CUDA mmq: ", n, " columns");
  if (w.n_out == 0) return;
  if (settings().kernel >= 2) {
    mmq2_launch(w, static_cast<const __half*>(x16), y, n, ctx, settings().splits, settings().kernel >= 3,
                settings().kernel == 4);
    return;
  }
  const bool done = hd::visit_split_decoder(w.type, [&](auto dec) {
    using T = decltype(dec);
    if constexpr (hd::mmq_type<T>()) {
      if (settings().tiles == 1)
        launch_mmq_type<T, 1>(w, static_cast<const __half*>(x16), y, n, ctx);
      else
        launch_mmq_type<T, 2>(w, static_cast<const __half*>(x16), y, n, ctx);
    }
  });
  check(done, "CUDA mmq: no kernel for ", dtype_name(w.type));
}

void matmul_mmq(const WeightMatrix& w, const float* x, float* y, int n, CudaContext& ctx) {
  validate_device_weights(w);
  if (n == 0 || w.n_out == 0) return;
  mmq_launch(w, mmq_prepare_x(x, w.n_in, n, ctx), y, n, ctx);
}

}  // namespace polykv::cuda
