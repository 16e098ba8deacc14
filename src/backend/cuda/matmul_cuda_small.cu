// The small float mat-vec: one column, float weights (f32 / f16 / bf16), at most kMaxRows rows of at most
// kMaxIn values. A MoE router is this shape (qwen3-30b-a3b: 128 x 2048 f32, 1 MB; gpt-oss-20b: 32 x 2880,
// 368 KB), and its mat-vec is latency, not bytes: the stream kernel's ring issues D - 1 stages before its
// PDL wait and the rest one stage at a time after it, so the router exposed 4.7 us a layer on an H100
// for 0.3 us of bytes (docs/MOE.md, "Where a token goes now").
//
// Here one warp owns one row and holds all of it in registers: lane l loads units l, l + 32, ... (16 bytes
// each, up to M of them) before the PDL wait, while the kernel before it (the norm that writes x) still
// runs. After the wait the block copies x into shared memory (one round trip to L2), and each lane runs
// its units in order, then one butterfly: the stream kernel's operations on the same values
// (lane_dot_f's order, float_dot_cols, warp_sum), so the same bits (MatmulCuda.FloatRegsKernelSameBits).
#include <cstdlib>
#include <cstring>

#include "backend/cuda/matmul_cuda_internal.h"
#include "backend/cuda/matmul_cuda_launch.cuh"

namespace polykv::cuda {
namespace {

constexpr int kWarps = 8;          // rows per block
constexpr int64_t kMaxRows = 1024;  // larger matrices stream (bytes, not latency)
constexpr int64_t kMaxIn = 4096;    // values of x in shared memory (16 KB)

// w: [n_out] rows of `stride` bytes (16-byte aligned start and stride); x: [n_units * V] floats (16-byte
// aligned; the values past n_in in the last unit are read, as the stream kernel reads them, and meet a
// weight of 0); y: [n_out]. M: units per lane the registers hold (n_units <= 32 M).
template <class F, int M>
__global__ void __launch_bounds__(32 * kWarps, 1)
    matvec_float_regs_kernel(const uint8_t* w, size_t stride, int64_t n_out, int64_t n_in, const float* x, float* y) {
  constexpr int V = F::kValues;
  __shared__ __align__(16) float xs[kMaxIn];
  allow_next_grid();  // the next kernel waits for this grid's completion before it reads y
  const int lane = int(threadIdx.x % 32);
  const int64_t row = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  const int64_t n_units = (n_in + V - 1) / V;
  const uint8_t* const r = w + (row < n_out ? row : 0) * stride;
  // The row's whole units (weights: nothing before this kernel writes them), before the wait.
  uint32_t raw[M][4] = {};
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const int64_t u = lane + 32 * m;
    if (row < n_out && (u + 1) * V <= n_in) hd::ld_16B<16>(r + 16 * u, raw[m]);
  }
  wait_for_previous_grid();  // x comes from the kernel before this one
  const int64_t n4 = n_units * V / 4;
  for (int64_t i = threadIdx.x; i < n4; i += 32 * kWarps) hd::ld_f32x4(x + 4 * i, xs + 4 * i);
  __syncthreads();
  if (row >= n_out) return;  // the whole warp

  float acc[1][1] = {{0.0f}};
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const int64_t u = lane + 32 * m;
    if (u < n_units) {
      hd::FUnit<V> wu[1];
      if ((u + 1) * V <= n_in) {
#pragma unroll
        for (int k = 0; k < 4; ++k) F::word(raw[m][k], wu[0].w + k * F::kPerWord);  // load_float_unit_at's
      } else {
        hd::load_float_unit_at<F, true>(r + 16 * u, u * V, n_in, wu[0]);  // the row ends inside this unit
      }
      hd::XFCols<V, 1> xv;
#pragma unroll
      for (int i = 0; i < V; ++i) xv.v[0][i] = xs[u * V + i];
      hd::float_dot_cols<V, 1, 1>(wu, xv, acc);
    }
  }
  const float v = hd::warp_sum(acc[0][0]);
  if (lane == 0) y[row] = v;
}

bool& regs_switch() {
  static bool on = [] {
    const char* e = std::getenv("POLYKV_CUDA_MATVEC_REGS");
    return !(e != nullptr && std::strcmp(e, "0") == 0);
  }();
  return on;
}

template <class F, int M>
void launch_m(const WeightMatrix& w, const float* x, float* y, CudaContext& ctx) {
  const unsigned grid = unsigned((w.n_out + kWarps - 1) / kWarps);
  launch_kernel(matvec_float_regs_kernel<F, M>, dim3(grid), dim3(32 * kWarps), 0, ctx.stream(), matvec_pdl(ctx),
                static_cast<const uint8_t*>(w.data), w.row_stride, w.n_out, w.n_in, x, y);
}

}  // namespace

void set_matvec_float_regs(bool on) { regs_switch() = on; }

bool matvec_float_regs_takes(const WeightMatrix& w, int ncols) {
  if (!regs_switch() || ncols != 1 || !is_float_weight(w.type) || !stream_rows(w)) return false;
  if (w.n_out < 1 || w.n_out > kMaxRows || w.n_in < 1) return false;
  int64_t v = 0;
  hd::visit_float_decoder(w.type, [&](auto dec) { v = decltype(dec)::kValues; });
  const int64_t n_units = (w.n_in + v - 1) / v;
  return n_units * v <= kMaxIn && n_units <= 32 * 32;
}

bool launch_matvec_float_regs(const WeightMatrix& w, const ActView& a, int col0, int ncols, float* y,
                              CudaContext& ctx) {
  if (a.xf == nullptr || a.dn.ss != nullptr || !matvec_float_regs_takes(w, ncols)) return false;
  const float* x = a.xf + int64_t(col0) * a.ldx;
  float* const yc = y + int64_t(col0) * w.n_out;
  return hd::visit_float_decoder(w.type, [&](auto dec) {
    using F = decltype(dec);
    const int64_t n_units = (w.n_in + F::kValues - 1) / F::kValues;
    const int64_t m = (n_units + 31) / 32;
    if (m <= 8) {
      launch_m<F, 8>(w, x, yc, ctx);
    } else if (m <= 16) {
      launch_m<F, 16>(w, x, yc, ctx);
    } else if constexpr (F::kValues == 4) {  // f16 / bf16 rows of kMaxIn values need at most 16
      if (m <= 24) launch_m<F, 24>(w, x, yc, ctx);
      else launch_m<F, 32>(w, x, yc, ctx);
    }
  });
}

}  // namespace polykv::cuda
