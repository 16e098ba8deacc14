// matmul(): the mat-vec kernels for few columns, the quantized mat-mul on tensor cores for split-layout
// weights and POLYKV_CUDA_MMQ_MIN..MAX columns (matmul_cuda_mmq.cu), cuBLAS on f16 tiles for the rest.
//
// Tensor-core path (prefill): x is converted to f16 once ([n][n_in], ctx's MatmulActs scratch); the
// weights are dequantized to f16 in tiles of rows ([tile][n_in], MatmulWeights scratch, at most
// 64 MiB) and each tile is one cublasGemmEx with f32 accumulation (CUBLAS_COMPUTE_32F) writing
// its rows of y. f16 weights skip the dequantization (cuBLAS reads w.data); f32 weights run an f32
// GEMM on w.data and x (no rounding to f16).
// Everything is issued on ctx's stream, so a tile's buffer is reused only after its GEMM has run.
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/matmul_cuda.h"
#include "backend/cuda/dequant_tile_staged.cuh"
#include "backend/cuda/matmul_cuda_internal.h"
#include "core/error.h"

namespace polykv::cuda {
namespace {

constexpr size_t kDefaultTileBytes = size_t(64) << 20;  // the dequantized weight tile's bound
// POLYKV_CUDA_PREFILL_TILE_MB=m (1..1024): the bound in MiB instead, for measuring whether a tile that stays in L2
// (an H100 / H200 has 50 / 60 MB) beats fewer, larger GEMMs. Not always the same bits: cuBLAS may pick another
// kernel (another K order) for another tile height.
size_t default_tile_bytes() {
  const char* e = std::getenv("POLYKV_CUDA_PREFILL_TILE_MB");
  if (!e || !*e) return kDefaultTileBytes;
  char* end = nullptr;
  const long mb = std::strtol(e, &end, 10);
  return (end && *end == '\0' && mb >= 1 && mb <= 1024) ? size_t(mb) << 20 : kDefaultTileBytes;
}
size_t g_tile_bytes = default_tile_bytes();

unsigned grid_stride_blocks(int64_t total, int threads) {
  return unsigned(std::clamp<int64_t>((total + threads - 1) / threads, 1, 65535));
}

__global__ void to_f16_kernel(const float* __restrict__ x, int64_t total, __half* __restrict__ out) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = __float2half_rn(x[i]);
}

// Rows [row0, row0 + rows) of quantized w to f16, dst [rows][n_in]; one thread per unit.
template <class T>
__global__ void dequantize_tile_q_kernel(const uint8_t* __restrict__ w, size_t stride, int64_t row0, int64_t n_in,
                                         int64_t total_units, __half* __restrict__ dst) {
  const int64_t units_per_row = n_in / T::kBlockValues * T::kParts;
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < total_units;
       t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = t / units_per_row, u = t % units_per_row;
    const int64_t blk = u / T::kParts;
    const int part = int(u % T::kParts);
    typename T::Unit unit;
    T::template load<2>(w + size_t(row0 + i) * stride + blk * T::kBlockBytes, part, unit);
    __half* out = dst + i * n_in + blk * T::kBlockValues;
#pragma unroll
    for (int r = 0; r < T::kRuns; ++r) {
      float v[16];
      hd::unit_run_values(unit, r, 1.0f, v);
      // 16 halves = 32 bytes at a 32-byte aligned address (n_in % 32 == 0, dst from cudaMalloc).
      hd::store_run16_f16(out + T::run_pos(part, r), v);
    }
  }
}

// The same values as dequantize_tile_q_kernel, staged (dequant_tile_staged.cuh: 1.6-3.8x faster tiles for the split
// layout on an H100, 2026-12-06; for ggml rows 1.2-2.9x per tile and q3_K pp512 1.20x, q5_0 1.13x: call H10).
// The default since H10 passed MatmulCuda.DequantTileRowsStagedSameBits; POLYKV_CUDA_DEQUANT_ROWS=old keeps the
// one-thread-per-unit kernel above.
template <class T>
__global__ void __launch_bounds__(hd::kStageThreads)
    dequantize_tile_q_staged_kernel(const uint8_t* __restrict__ w, size_t stride, int64_t row0, int64_t n_in,
                                    int64_t total_units, __half* __restrict__ dst) {
  hd::dequantize_tile_staged<T>(total_units, n_in / T::kBlockValues * T::kParts, dst,
                                [&](int64_t i, int64_t u, int part, typename T::Unit& unit) {
                                  T::template load<2>(w + size_t(row0 + i) * stride + u / T::kParts * T::kBlockBytes,
                                                      part, unit);
                                });
}

// POLYKV_CUDA_DEQUANT_ROWS=old|staged (default staged): -1 not read yet, 0 old kernel, 1 staged.
int g_rows_staged = -1;
bool rows_staged() {
  if (g_rows_staged < 0) {
    const char* e = std::getenv("POLYKV_CUDA_DEQUANT_ROWS");
    g_rows_staged = (e && std::strcmp(e, "old") == 0) ? 0 : 1;
  }
  return g_rows_staged == 1;
}

template <class F>
__global__ void dequantize_tile_f_kernel(const uint8_t* __restrict__ w, size_t stride, int64_t row0, int64_t n_in,
                                         int64_t total, __half* __restrict__ dst) {
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < total; t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = t / n_in, k = t % n_in;
    dst[t] = __float2half_rn(F::elem(w + size_t(row0 + i) * stride + k * F::kElemBytes));
  }
}

void dequantize_tile_f16(const WeightMatrix& w, int64_t row0, int64_t rows, __half* dst, cudaStream_t s) {
  if (w.layout == WeightLayout::CudaSplit) {
    dequantize_split_tile_f16(w, row0, rows, dst, s);  // the same f16 values
    return;
  }
  const uint8_t* wd = static_cast<const uint8_t*>(w.data);
  constexpr int kT = 256;
  const bool done = hd::visit_quant_decoder(w.type, [&](auto dec) {
    using T = decltype(dec);
    const int64_t total = rows * (w.n_in / T::kBlockValues * T::kParts);
    if (rows_staged())
      dequantize_tile_q_staged_kernel<T><<<grid_stride_blocks(total, hd::kStageThreads), hd::kStageThreads, 0, s>>>(
          wd, w.row_stride, row0, w.n_in, total, dst);
    else
      dequantize_tile_q_kernel<T><<<grid_stride_blocks(total, kT), kT, 0, s>>>(wd, w.row_stride, row0, w.n_in, total, dst);
  });
  if (!done) {
    hd::visit_float_decoder(w.type, [&](auto dec) {
      using F = decltype(dec);
      const int64_t total = rows * w.n_in;
      dequantize_tile_f_kernel<F><<<grid_stride_blocks(total, kT), kT, 0, s>>>(wd, w.row_stride, row0, w.n_in, total, dst);
    });
  }
  POLYKV_CUDA_LAUNCHED();
}

// y[:, o0 : o0 + rows] = A[rows][k] · x[n][k]^T in cuBLAS's column-major terms: C (rows x n, ldc =
// n_out) = op(A) (rows x k) · B (k x n), A stored as k x rows with lda, transposed.
std::atomic<uint64_t> g_cublas_calls{0};

void gemm(CudaContext& ctx, int64_t rows, int n, int64_t k, const void* a, cudaDataType at, int64_t lda, const void* b,
          cudaDataType bt, float* c, int64_t ldc) {
  const float alpha = 1.0f, beta = 0.0f;
  g_cublas_calls.fetch_add(1, std::memory_order_relaxed);
  POLYKV_CUBLAS_CHECK(blas::gemm_ex(ctx.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, int(rows), n, int(k), &alpha, a, at,
                                      int(lda), b, bt, int(k), &beta, c, CUDA_R_32F, int(ldc), CUBLAS_COMPUTE_32F,
                                      CUBLAS_GEMM_DEFAULT));
}

// x ([n][k] floats) as f16 in the MatmulActs scratch, for matmul_tensor_cores_f16.
const __half* acts_f16(const float* x, int64_t k, int n, CudaContext& ctx) {
  const int64_t total_x = int64_t(n) * k;
  __half* x16 = static_cast<__half*>(ctx.scratch(Scratch::MatmulActs, size_t(total_x) * sizeof(__half)));
  to_f16_kernel<<<grid_stride_blocks(total_x, 256), 256, 0, ctx.stream()>>>(x, total_x, x16);
  POLYKV_CUDA_LAUNCHED();
  return x16;
}

// y = w · x on cuBLAS with x16 = acts_f16(x): f16 weights as they are, quantized ones dequantized to f16 a
// tile of rows at a time (g_tile_bytes). w is not f32.
void matmul_tensor_cores_f16(const WeightMatrix& w, const __half* x16, float* y, int n, CudaContext& ctx) {
  const cudaStream_t s = ctx.stream();
  if (w.type == DType::F16) {
    gemm(ctx, w.n_out, n, w.n_in, w.data, CUDA_R_16F, int64_t(w.row_stride / 2), x16, CUDA_R_16F, y, w.n_out);
    return;
  }
  const int64_t row_f16_bytes = w.n_in * int64_t(sizeof(__half));
  int64_t tile = std::max<int64_t>(1, int64_t(g_tile_bytes) / row_f16_bytes);
  if (tile >= 128) tile = tile / 128 * 128;
  tile = std::min(tile, w.n_out);
  __half* wt = static_cast<__half*>(ctx.scratch(Scratch::MatmulWeights, size_t(tile * row_f16_bytes)));
  for (int64_t o0 = 0; o0 < w.n_out; o0 += tile) {
    const int64_t rows = std::min(tile, w.n_out - o0);
    dequantize_tile_f16(w, o0, rows, wt, s);
    gemm(ctx, rows, n, w.n_in, wt, CUDA_R_16F, w.n_in, x16, CUDA_R_16F, y + o0, w.n_out);
  }
}

void matmul_tensor_cores(const WeightMatrix& w, const float* x, float* y, int n, CudaContext& ctx) {
  if (w.type == DType::F32) {
    gemm(ctx, w.n_out, n, w.n_in, w.data, CUDA_R_32F, int64_t(w.row_stride / 4), x, CUDA_R_32F, y, w.n_out);
    return;
  }
  matmul_tensor_cores_f16(w, acts_f16(x, w.n_in, n, ctx), y, n, ctx);
}

// Whether matmul() takes matmul_tensor_cores for w at n columns (not batch invariant).
bool takes_tensor_cores(const WeightMatrix& w, int n) {
  return n > kMatvecMaxCols && !mmq_takes(w, n) && (is_float_weight(w.type) || n > kChunkedMatvecMaxCols);
}

}  // namespace

uint64_t cublas_call_count() { return g_cublas_calls.load(std::memory_order_relaxed); }

void set_rows_dequant_staged(bool on) { g_rows_staged = on ? 1 : 0; }

void dequantize_tile(const WeightMatrix& w, int64_t row0, int64_t rows, void* dst, cudaStream_t s) {
  check(w.type != DType::F32 && w.type != DType::F16, "CUDA dequantize_tile: ", dtype_name(w.type));
  dequantize_tile_f16(w, row0, rows, static_cast<__half*>(dst), s);
}

void set_prefill_tile_bytes(size_t bytes) { g_tile_bytes = bytes ? bytes : default_tile_bytes(); }

void matmul(const WeightMatrix& w, const float* x, float* y, int n, CudaContext& ctx) {
  validate_device_weights(w);
  check(n >= 0, "CUDA matmul: negative column count ", n);
  if (n == 0 || w.n_out == 0) return;
  if (ctx.batch_invariant()) {
    // Every column count on the mat-vec kernels, 8 columns per pass: a column's bits are those it gets
    // alone (matmul_cuda.h, "Batch invariance"); mmq and cuBLAS would round it differently.
    const ActView a = prepare_acts(w, x, n, ctx);
    for (int c = 0; c < n; c += kMatvecMaxCols) launch_matvec(w, a, c, std::min(kMatvecMaxCols, n - c), y, ctx);
    return;
  }
  if (n <= kMatvecMaxCols && !mmq_takes(w, n)) {
    matvec(w, x, y, n, ctx);
    return;
  }
  if (mmq_takes(w, n)) {
    // Split-layout weights, min..max columns: one read of the weights, tensor cores (matmul_cuda_mmq.cu).
    mmq_launch(w, mmq_prepare_acts(w, x, n, ctx), y, n, ctx);
    return;
  }
  if (!is_float_weight(w.type) && n <= kChunkedMatvecMaxCols) {
    // Few columns: reading the weights once per 8 columns costs less than dequantizing them.
    const ActView a = prepare_acts(w, x, n, ctx);
    for (int c = 0; c < n; c += kMatvecMaxCols) launch_matvec(w, a, c, std::min(kMatvecMaxCols, n - c), y, ctx);
    return;
  }
  matmul_tensor_cores(w, x, y, n, ctx);
}

void matmul_parts(std::span<const MatvecPart> parts, const float* x, int n, CudaContext& ctx) {
  for (const MatvecPart& p : parts) validate_device_weights(*p.w);
  check(n >= 0, "CUDA matmul: negative column count ", n);
  if (n == 0 || parts.empty()) return;
  const WeightMatrix& w0 = *parts[0].w;
  if (ctx.batch_invariant()) {  // matmul()'s mat-vec passes for every part, in one launch where they stream together
    if (parts_stream_together(parts)) {
      const ActView a = prepare_acts(w0, x, n, ctx);
      for (int c = 0; c < n; c += kMatvecMaxCols)
        launch_matvec_stream_parts(parts, a, c, std::min(kMatvecMaxCols, n - c), ctx);
      return;
    }
    for (const MatvecPart& p : parts) matmul(*p.w, x, p.y, n, ctx);
    return;
  }
  bool all_mmq = true;
  for (const MatvecPart& p : parts) all_mmq = all_mmq && mmq_takes(*p.w, n) && p.w->n_in == w0.n_in;
  if (all_mmq) {
    // What matmul() does for each part: in one launch where the wgmma kernel takes them all, else x
    // converted once per order the parts' kernels read (one conversion unless the parts' types differ
    // and the wgmma kernel takes them).
    if (mmq_launch_fused(parts, x, n, ctx)) return;
    MmqActs acts;
    for (const MatvecPart& p : parts) {
      if (!mmq_acts_fit(acts, *p.w, n, ctx)) acts = mmq_prepare_acts(*p.w, x, n, ctx);
      mmq_launch(*p.w, acts, p.y, n, ctx);
    }
    return;
  }
  bool all_f16_gemm = true;
  for (const MatvecPart& p : parts)
    all_f16_gemm = all_f16_gemm && takes_tensor_cores(*p.w, n) && p.w->type != DType::F32 && p.w->n_in == w0.n_in;
  if (all_f16_gemm) {
    // What matmul() does for each part, x converted to f16 once (the same bits).
    const __half* x16 = acts_f16(x, w0.n_in, n, ctx);
    for (const MatvecPart& p : parts) matmul_tensor_cores_f16(*p.w, x16, p.y, n, ctx);
    return;
  }
  const bool matvec_path = n <= kMatvecMaxCols || (!is_float_weight(w0.type) && n <= kChunkedMatvecMaxCols);
  if (matvec_path && parts_stream_together(parts)) {
    // What matmul() does for each part (prepare_acts depends only on the type, n_in and x).
    const ActView a = prepare_acts(w0, x, n, ctx);
    for (int c = 0; c < n; c += kMatvecMaxCols)
      launch_matvec_stream_parts(parts, a, c, std::min(kMatvecMaxCols, n - c), ctx);
    return;
  }
  for (const MatvecPart& p : parts) matmul(*p.w, x, p.y, n, ctx);
}

}  // namespace polykv::cuda
