// CUDA mat-vec kernels (1..8 columns) for rows that are not 16-byte aligned, the activation
// preparation every mat-vec kernel reads, dispatch, and dequantize_rows. The arithmetic is in
// matmul_cuda_{hd,decode,dot}.cuh (tested on the CPU). Rows whose start and stride are 16-byte
// aligned take the stream kernel of matmul_cuda_stream.cu: packed rows from cudaMalloc of every type
// when n_in is a multiple of 2048 (llama-style shapes), and of most types for multiples of 256.
//
// Direct kernels: one warp computes R consecutive rows (rows_per_warp: 2 or 4) for all the call's
// columns: each lane walks units lane, lane + 32, ... of the rows (consecutive lanes read consecutive
// units), decodes a unit once and multiplies it with every column (the activations of a unit are
// loaded once for the R rows); the warp then sums its lanes with a fixed butterfly. Each lane loads
// its own units from device memory with the widest accesses the rows' alignment allows. The stream
// kernel computes every row with exactly the same operations, so a row's result does not depend on
// which kernel ran.
#include "backend/cuda/matmul_cuda.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string_view>

#include "backend/cuda/matmul_cuda_acts.cuh"
#include "backend/cuda/matmul_cuda_internal.h"
#include "backend/cuda/matmul_cuda_launch.cuh"
#include "core/error.h"

namespace polykv::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kThreads = 32 * kWarpsPerBlock;
// Blocks per SM the compiler must allow for: 3 for 4 columns (<= 170 registers, 12 warps per SM;
// uncapped it takes ~250); no cap otherwise (1-2 columns stay under ~190; 8 columns need the
// registers: capped at 170 some types spill).
template <int NC>
__host__ __device__ constexpr int min_blocks() { return NC == 4 ? 3 : 1; }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off /= 2) v = hd::fadd(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// Every lane holds every (r, c) sum after warp_sum; lane r * NC + c stores one of them.
template <int R, int NC>
__device__ __forceinline__ void store_sums(float (&acc)[R][NC], int lane, int64_t row0, int64_t n_out, int ncols,
                                           float* y) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int c = 0; c < NC; ++c) {
      const float v = warp_sum(acc[r][c]);
      if (lane == r * NC + c && c < ncols && row0 + r < n_out) y[int64_t(c) * n_out + row0 + r] = v;
    }
  }
}

template <int R>
__device__ __forceinline__ void warp_rows(const uint8_t* w, size_t stride, int64_t n_out, int64_t row0,
                                          const uint8_t* (&rows)[R]) {
#pragma unroll
  for (int r = 0; r < R; ++r) rows[r] = w + size_t(min(row0 + r, n_out - 1)) * stride;
}

// Quantized weights: y[c][o] for the warp's rows, c < ncols. xq / xs / y start at the call's first
// column.
template <class T, int NC, int A>
__global__ void __launch_bounds__(kThreads, min_blocks<NC>())
    matvec_q_kernel(const uint8_t* __restrict__ w, size_t stride, int64_t n_out, int64_t n_in,
                    const int8_t* __restrict__ xq, const hd::ActScale* __restrict__ xs, int ncols,
                    float* __restrict__ y) {
  constexpr int R = hd::rows_per_warp_q<T, NC>();
  const int lane = int(threadIdx.x % 32);
  const int64_t row0 = (int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32) * R;
  if (row0 >= n_out) return;  // the whole warp
  const uint8_t* rows[R];
  warp_rows<R>(w, stride, n_out, row0, rows);
  float acc[R][NC] = {};
  hd::lane_dot_q<T, NC, R, A>(rows, xq, xs, n_in, ncols, lane, acc);
  store_sums<R, NC>(acc, lane, row0, n_out, ncols, y);
}

// Float weights; xf: [*][ldx] f32 zero-padded activations. kVec: rows 16-byte aligned.
template <class F, int NC, bool kVec>
__global__ void __launch_bounds__(kThreads, min_blocks<NC>())
    matvec_f_kernel(const uint8_t* __restrict__ w, size_t stride, int64_t n_out, int64_t n_in,
                    const float* __restrict__ xf, int64_t ldx, int ncols, float* __restrict__ y) {
  constexpr int R = hd::rows_per_warp_f<F, NC>();
  const int lane = int(threadIdx.x % 32);
  const int64_t row0 = (int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32) * R;
  if (row0 >= n_out) return;
  const uint8_t* rows[R];
  warp_rows<R>(w, stride, n_out, row0, rows);
  float acc[R][NC] = {};
  hd::lane_dot_f<F, NC, R, kVec>(rows, xf, ldx, n_in, ncols, lane, acc);
  store_sums<R, NC>(acc, lane, row0, n_out, ncols, y);
}

unsigned grid_for_rows(int64_t n_out, int R, int warps_per_block = kWarpsPerBlock) {
  const int64_t warps = (n_out + R - 1) / R;
  return unsigned((warps + warps_per_block - 1) / warps_per_block);
}

// Rows not 16-byte aligned (the stream kernel takes the others): each lane loads its own units with
// the widest accesses the alignment allows.
template <class T, int NC>
void launch_q(const WeightMatrix& w, const ActView& a, int col0, int ncols, float* y, cudaStream_t s) {
  const uint8_t* wd = static_cast<const uint8_t*>(w.data);
  const int8_t* xq = a.qs + int64_t(col0) * w.n_in;
  const hd::ActScale* xs = a.s + int64_t(col0) * (w.n_in / hd::kActBlock);
  float* yc = y + int64_t(col0) * w.n_out;
  constexpr int R = hd::rows_per_warp_q<T, NC>();
  const int align = hd::common_alignment(reinterpret_cast<uintptr_t>(w.data), w.row_stride);
  const unsigned grid = grid_for_rows(w.n_out, R);
  if constexpr (T::kMaxAlign > 2 && T::kMaxAlign < 16) {
    if (align >= T::kMaxAlign) {
      matvec_q_kernel<T, NC, T::kMaxAlign><<<grid, kThreads, 0, s>>>(wd, w.row_stride, w.n_out, w.n_in, xq, xs,
                                                                      ncols, yc);
      POLYKV_CUDA_LAUNCHED();
      return;
    }
  }
  matvec_q_kernel<T, NC, 2><<<grid, kThreads, 0, s>>>(wd, w.row_stride, w.n_out, w.n_in, xq, xs, ncols, yc);
  POLYKV_CUDA_LAUNCHED();
}

template <class F, int NC>
void launch_f(const WeightMatrix& w, const ActView& a, int col0, int ncols, float* y, cudaStream_t s) {
  const uint8_t* wd = static_cast<const uint8_t*>(w.data);
  const float* xf = a.xf + int64_t(col0) * a.ldx;
  float* yc = y + int64_t(col0) * w.n_out;
  const unsigned grid = grid_for_rows(w.n_out, hd::rows_per_warp_f<F, NC>());
  matvec_f_kernel<F, NC, false><<<grid, kThreads, 0, s>>>(wd, w.row_stride, w.n_out, w.n_in, xf, a.ldx, ncols, yc);
  POLYKV_CUDA_LAUNCHED();
}

// The narrowest kernel width that holds ncols columns (its extra columns repeat the last one and are
// not stored; the width does not change any result).
template <class Launch>
void by_width(int ncols, Launch&& launch) {
  if (ncols == 1) launch(std::integral_constant<int, 1>{});
  else if (ncols == 2) launch(std::integral_constant<int, 2>{});
  else if (ncols <= 4) launch(std::integral_constant<int, 4>{});
  else launch(std::integral_constant<int, 8>{});
}

// ---- activations ----

// One warp per block of 32 activations (x is [n][n_in] with n_in % 32 == 0, so block b of the
// flattened array is column b / (n_in / 32)).
// Launched with PDL (matmul_cuda_launch.cuh): waits for the kernel before it (which writes x, or
// reads the scratch buffer these writes overwrite), and lets the mat-vec kernel after it start and
// issue its weight copies at once.
// early: the mat-vec may launch before this kernel's wait (early_allow()).
__global__ void quantize_acts_kernel(const float* __restrict__ x, int64_t n_blocks, int8_t* __restrict__ qs,
                                     hd::ActScale* __restrict__ s, int early) {
  if (early) allow_next_grid();
  wait_for_previous_grid();
  if (!early) allow_next_grid();
  const int64_t b = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (b >= n_blocks) return;
  const int lane = int(threadIdx.x % 32);
  quantize_act_block_warp(x[b * 32 + lane], lane, qs + b * 32, s + b);
}

__global__ void pad_acts_kernel(const float* __restrict__ x, int64_t n_in, int64_t ldx, int64_t total,
                                float* __restrict__ xf) {
  wait_for_previous_grid();  // as quantize_acts_kernel
  allow_next_grid();
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = i / ldx, k = i % ldx;
    xf[i] = k < n_in ? x[c * n_in + k] : 0.0f;
  }
}

unsigned grid_stride_blocks(int64_t total, int threads) {
  return unsigned(std::clamp<int64_t>((total + threads - 1) / threads, 1, 65535));
}

// ---- dequantize_rows ----

template <class T>
__global__ void dequantize_rows_q_kernel(const uint8_t* __restrict__ w, size_t stride, int64_t n_out, int64_t n_in,
                                         const int32_t* __restrict__ rows, int64_t total_units, float scale,
                                         float* __restrict__ dst) {
  const int64_t units_per_row = n_in / T::kBlockValues * T::kParts;
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < total_units;
       t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = t / units_per_row, u = t % units_per_row;
    const int64_t blk = u / T::kParts;
    const int part = int(u % T::kParts);
    const int32_t row = rows[i];
    float* out = dst + i * n_in + blk * T::kBlockValues;
    if (row < 0 || row >= n_out) {
      for (int r = 0; r < T::kRuns; ++r)
        for (int k = 0; k < 16; ++k) out[T::run_pos(part, r) + k] = __int_as_float(0x7fc00000);
      continue;
    }
    typename T::Unit unit;
    T::template load<2>(w + size_t(row) * stride + blk * T::kBlockBytes, part, unit);
#pragma unroll
    for (int r = 0; r < T::kRuns; ++r) {
      float v[16];
      hd::unit_run_values(unit, r, scale, v);
#pragma unroll
      for (int k = 0; k < 16; ++k) out[T::run_pos(part, r) + k] = v[k];
    }
  }
}

template <class F>
__global__ void dequantize_rows_f_kernel(const uint8_t* __restrict__ w, size_t stride, int64_t n_out, int64_t n_in,
                                         const int32_t* __restrict__ rows, int64_t total, float scale,
                                         float* __restrict__ dst) {
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < total; t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = t / n_in, k = t % n_in;
    const int32_t row = rows[i];
    dst[t] = (row < 0 || row >= n_out) ? __int_as_float(0x7fc00000)
                                       : hd::fmul(F::elem(w + size_t(row) * stride + k * F::kElemBytes), scale);
  }
}

size_t round_up(size_t v, size_t m) { return (v + m - 1) / m * m; }

}  // namespace

bool is_float_weight(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

namespace {
std::atomic<int> g_ternary{-1};  // -1: POLYKV_CUDA_TERNARY not read yet
bool ternary_weights_enabled() {  // unless POLYKV_CUDA_TERNARY=0; read once unless set_ternary_weights_enabled
  int on = g_ternary.load(std::memory_order_relaxed);
  if (on < 0) {
    const char* e = std::getenv("POLYKV_CUDA_TERNARY");
    on = !(e != nullptr && std::string_view(e) == "0");
    g_ternary.store(on, std::memory_order_relaxed);
  }
  return on != 0;
}
}  // namespace

void set_ternary_weights_enabled(bool on) { g_ternary.store(on ? 1 : 0, std::memory_order_relaxed); }

bool has_weight_kernels(DType t) {
  if (t == DType::TQ1_0 || t == DType::TQ2_0 || t == DType::PTQ1_0) return ternary_weights_enabled();
  return is_float_weight(t) || hd::visit_quant_decoder(t, [](auto) {});
}

void validate_device_weights(const WeightMatrix& w) {
  const DTypeInfo& info = dtype_info(w.type);
  if (w.layout == WeightLayout::CudaSplit) {
    check(w.n_in > 0 && w.n_out >= 0, "CUDA matmul: bad shape ", w.n_out, "x", w.n_in);
    check(w.data != nullptr || w.n_out == 0, "CUDA matmul: null weights");
    check(w.n_out < (int64_t(1) << 31) && w.n_in < (int64_t(1) << 31), "CUDA matmul: matrix too large");
    validate_split_weights(w);
    return;
  }
  check(info.weight_type, "CUDA matmul: unsupported weight type ", info.name);
  check(w.n_in > 0 && w.n_out >= 0, "CUDA matmul: bad shape ", w.n_out, "x", w.n_in);
  check(w.row_stride >= row_bytes(w.type, w.n_in), "CUDA matmul: row stride ", w.row_stride, " is smaller than a ",
        info.name, " row of ", w.n_in, " values");
  check(w.data != nullptr || w.n_out == 0, "CUDA matmul: null weights");
  const int need = w.type == DType::F32 ? 4 : w.type == DType::MXFP4 ? 1 : 2;  // mxfp4: 17-byte blocks
  check(hd::common_alignment(reinterpret_cast<uintptr_t>(w.data), w.row_stride) >= need,
        "CUDA matmul: ", info.name, " rows must start on ", need, "-byte boundaries (stride ", w.row_stride, ")");
  check(w.n_out < (int64_t(1) << 31) && w.n_in < (int64_t(1) << 31), "CUDA matmul: matrix too large");
}

ActView prepare_acts(const WeightMatrix& w, const float* x, int n, CudaContext& ctx) {
  ActView a;
  const cudaStream_t s = ctx.stream();
  if (is_float_weight(w.type)) {
    a.ldx = int64_t(round_up(size_t(w.n_in), 8));
    const int64_t total = a.ldx * n;
    float* xf = static_cast<float*>(ctx.scratch(Scratch::MatmulActs, size_t(total) * sizeof(float)));
    launch_kernel(pad_acts_kernel, dim3(grid_stride_blocks(total, 256)), dim3(256), 0, s, matvec_pdl(ctx), x, w.n_in,
                  a.ldx, total, xf);
    a.xf = xf;
    return a;
  }
  const int64_t n_blocks = w.n_in / hd::kActBlock * n;
  const size_t qs_bytes = round_up(size_t(w.n_in) * size_t(n), 256);
  uint8_t* buf = static_cast<uint8_t*>(ctx.scratch(Scratch::MatmulActs, qs_bytes + size_t(n_blocks) * sizeof(hd::ActScale)));
  int8_t* qs = reinterpret_cast<int8_t*>(buf);
  hd::ActScale* sc = reinterpret_cast<hd::ActScale*>(buf + qs_bytes);
  constexpr int kBlocksPerCta = 8;
  launch_kernel(quantize_acts_kernel, dim3(unsigned((n_blocks + kBlocksPerCta - 1) / kBlocksPerCta)),
                dim3(32 * kBlocksPerCta), 0, s, matvec_pdl(ctx), x, n_blocks, qs, sc, early_allow() >= 2 ? 1 : 0);
  a.qs = qs;
  a.s = sc;
  return a;
}

int early_allow() {
  static const int level = [] {
    const char* e = std::getenv("POLYKV_CUDA_EARLY_ALLOW");
    if (e && std::strcmp(e, "0") == 0) return 0;
    if (e && std::strcmp(e, "all") == 0) return 2;
    return 1;
  }();
  return level;
}

void launch_matvec(const WeightMatrix& w, const ActView& a, int col0, int ncols, float* y, CudaContext& ctx) {
  check(ncols >= 1 && ncols <= kMatvecMaxCols, "CUDA matvec: ", ncols, " columns (1..", kMatvecMaxCols, ")");
  if (w.n_out == 0) return;
  if (w.layout == WeightLayout::CudaSplit) {
    const MatvecPart part{&w, y};
    check(launch_matvec_split_parts(std::span<const MatvecPart>(&part, 1), a, col0, ncols, ctx),
          "CUDA matvec: split ", dtype_name(w.type), " weights without a split kernel");
    return;
  }
  check(a.dn.ss == nullptr, "CUDA matvec: a deferred norm needs split weights (", dtype_name(w.type), ")");
  if (launch_matvec_float_regs(w, a, col0, ncols, y, ctx)) return;  // small float matrices (routers)
  if (launch_matvec_stream(w, a, col0, ncols, y, ctx)) return;
  const cudaStream_t s = ctx.stream();
  const bool done = hd::visit_quant_decoder(w.type, [&](auto dec) {
    using T = decltype(dec);
    by_width(ncols, [&](auto nc) { launch_q<T, decltype(nc)::value>(w, a, col0, ncols, y, s); });
  });
  if (done) return;
  const bool float_done = hd::visit_float_decoder(w.type, [&](auto dec) {
    using F = decltype(dec);
    by_width(ncols, [&](auto nc) { launch_f<F, decltype(nc)::value>(w, a, col0, ncols, y, s); });
  });
  check(float_done, "CUDA matmul: no kernel for weight type ", dtype_name(w.type));
}

void matvec(const WeightMatrix& w, const float* x, float* y, int n, CudaContext& ctx) {
  validate_device_weights(w);
  check(n >= 0 && n <= kMatvecMaxCols, "CUDA matvec: ", n, " columns (at most ", kMatvecMaxCols, ")");
  if (n == 0 || w.n_out == 0) return;
  // Float weights read x itself when its rows are already what prepare_acts would copy (n_in a multiple
  // of 8: no padding) and y does not overwrite it: one kernel fewer (a MoE router's f32 mat-vec), the same
  // values.
  const auto* xb = reinterpret_cast<const uint8_t*>(x);
  const auto* yb = reinterpret_cast<const uint8_t*>(y);
  const bool apart = yb + size_t(n) * size_t(w.n_out) * sizeof(float) <= xb ||
                     xb + size_t(n) * size_t(w.n_in) * sizeof(float) <= yb;
  if (is_float_weight(w.type) && w.n_in % 8 == 0 && apart && reinterpret_cast<uintptr_t>(x) % 16 == 0) {
    ActView a;
    a.xf = x;
    a.ldx = w.n_in;
    launch_matvec(w, a, 0, n, y, ctx);
    return;
  }
  const ActView a = prepare_acts(w, x, n, ctx);
  launch_matvec(w, a, 0, n, y, ctx);
}

void dequantize_rows(const WeightMatrix& w, const int32_t* rows, int n, float scale, float* dst, cudaStream_t stream) {
  validate_device_weights(w);
  check(n >= 0, "dequantize_rows: negative count");
  if (n == 0) return;
  if (w.layout == WeightLayout::CudaSplit) {
    dequantize_split_rows(w, rows, n, scale, dst, stream);
    return;
  }
  const uint8_t* wd = static_cast<const uint8_t*>(w.data);
  constexpr int kT = 256;
  const bool done = hd::visit_quant_decoder(w.type, [&](auto dec) {
    using T = decltype(dec);
    const int64_t total = int64_t(n) * (w.n_in / T::kBlockValues * T::kParts);
    dequantize_rows_q_kernel<T><<<grid_stride_blocks(total, kT), kT, 0, stream>>>(wd, w.row_stride, w.n_out, w.n_in,
                                                                                rows, total, scale, dst);
  });
  if (!done) {
    hd::visit_float_decoder(w.type, [&](auto dec) {
      using F = decltype(dec);
      const int64_t total = int64_t(n) * w.n_in;
      dequantize_rows_f_kernel<F><<<grid_stride_blocks(total, kT), kT, 0, stream>>>(wd, w.row_stride, w.n_out,
                                                                                  w.n_in, rows, total, scale, dst);
    });
  }
  POLYKV_CUDA_LAUNCHED();
}

}  // namespace polykv::cuda
