// The stream mat-vec kernel: every weight type, rows 16-byte aligned (start and stride), 1..8 columns.
//
// Decode reads each weight byte once, so the kernel is bound by memory bandwidth, and reaching it
// needs ~4 MB in flight across an H200 (4.2 TB/s x ~1 us): ~32 KB per SM at every moment, from the
// first microsecond to the last. The first kernel (one short-lived warp per 2-4 rows, 2 copies in
// flight per warp) kept too little in flight and paid a full memory latency per warp several times
// over, so 4096-row matrices ran at ~20-40 % of the bandwidth. Here:
//  * A persistent grid: as many blocks as fit on the GPU (occupancy), or fewer for small matrices;
//    warp gw of nw owns rows [gw * n_out / nw, (gw + 1) * n_out / nw) (balanced to one row) and
//    streams them R rows at a time (R = 1 for matrices too small to give every warp R rows).
//  * A ring of D stages per warp in shared memory (about 6 KB, D = 3..8): stage s holds one
//    iteration (32 units of each of the R rows, 64 when R = 1: hd::Stage / hd::FStage) copied with
//    16-byte cp.async; D - 1 stages are in flight while one is computed, and the ring runs on across the
//    warp's row groups without draining. Small matrices (4096 x 4096 q4_0: one row per warp, 2
//    iterations) have their whole share in flight at once.
//  * The weight copies are issued before waiting for the activation kernel (PDL,
//    matmul_cuda_launch.cuh), and the next call's activation kernel may launch while this one runs;
//    for 1-2 columns a unit's activations are loaded before its weights land.
// A row is computed by one warp exactly as by lane_dot_q / lane_dot_f (lane l takes units l, l + 32,
// ..., then one butterfly): nothing about the split (R, D, grid, warps) changes a bit of the result,
// so results are batch invariant and equal the host emulation (tests/cuda/matmul_cuda_test_util.h).
#include <cuda_pipeline.h>

#include <algorithm>
#include <atomic>
#include <span>

#include "backend/cuda/matmul_cuda_internal.h"
#include "backend/cuda/matmul_cuda_launch.cuh"
#include "core/error.h"

namespace polykv::cuda {
namespace {

// Staging of a quantized type: iteration it = blocks [it * kBlocks, ...) of a row (hd::Stage), K
// units per lane.
template <class T, int K>
struct QuantStaging {
  static constexpr bool kQuant = true;
  static constexpr int kChunks = hd::stage_chunks<T, K>();
  using Plan = hd::Stage<T, K>;
  __device__ static int64_t iters(int64_t n_in) {
    const int64_t n_blocks = n_in / T::kBlockValues;
    return (n_blocks + Plan::kBlocks - 1) / Plan::kBlocks;
  }
  __device__ static Plan plan(int64_t it, int64_t n_in) { return hd::stage_plan<T, K>(it, n_in / T::kBlockValues); }
  __device__ static int64_t src_offset(const Plan& p) { return p.blk0 * T::kBlockBytes - p.lead; }
  __device__ static int chunks(const Plan& p) { return p.chunks; }
};

// Staging of a float type: iteration it = units [32 K it, 32 K (it + 1)) of 16 bytes (hd::FStage).
template <class F, int K>
struct FloatStaging {
  static constexpr bool kQuant = false;
  static constexpr int kChunks = 32 * K;
  using Plan = hd::FStage<K>;
  __device__ static int64_t iters(int64_t n_in) {
    const int64_t n_units = (n_in + F::kValues - 1) / F::kValues;
    return (n_units + 32 * K - 1) / (32 * K);
  }
  __device__ static Plan plan(int64_t it, int64_t n_in) { return hd::fstage_plan<F, K>(it, n_in); }
  __device__ static int64_t src_offset(const Plan& p) { return 16 * p.u0; }
  __device__ static int chunks(const Plan& p) { return p.nu; }
};

template <class Dec>
constexpr bool is_quant_dec() {
  return requires { Dec::kBlockValues; };
}

template <class Dec, int K>
using StagingOf = std::conditional_t<is_quant_dec<Dec>(), QuantStaging<Dec, K>, FloatStaging<Dec, K>>;

// Launch shape of the kernel for decoder Dec, NC columns, R rows per warp. One row per warp takes 2
// units per lane per stage (K): the per-stage work (copy issue, bookkeeping) is then paid per 64
// units, as it is per 4 x 32 with 4 rows; a lane's units and their order do not change.
template <class Dec, int NC, int R>
struct StreamCfg {
  static constexpr int kUnitsPerLane = R == 1 ? 2 : 1;
  using Staging = StagingOf<Dec, kUnitsPerLane>;
  static constexpr int kWarps = NC <= 2 ? 8 : 4;  // wide calls need the registers
  static constexpr int kStageBytes = R * Staging::kChunks * 16;  // one warp, one stage
  // About 6 KB of ring per warp, 3..8 stages: with 16-32 warps per SM, 100-150 KB in flight per SM
  // (4 blocks of 47 KB for q4_0 with R = 1: 32 warps).
  static constexpr int kRingTarget = 6144;
  static constexpr int kDepth = kRingTarget / kStageBytes < 3   ? 3
                                : kRingTarget / kStageBytes > 8 ? 8
                                                                : kRingTarget / kStageBytes;
  static constexpr size_t kSmem = size_t(kWarps) * kDepth * kStageBytes;
};

// Arguments of the kernel (by value). xq / xs / xf / y start at the call's first column.
// The rows are those of up to kMaxMatvecParts matrices of one type, n_in and stride read with the
// same activations (q, k, v; gate, up), numbered one after the other: part p holds rows
// [begin[p], begin[p] + n_out_p) of the n_out in all; its row r reads w[p] + (r - begin[p]) * stride
// and writes y[p][c * n_out_p + r - begin[p]]. A row is computed exactly as in a call on its matrix
// alone (nothing depends on the split), so the parts' results equal separate calls bit for bit.
struct StreamArgs {
  const uint8_t* w[kMaxMatvecParts];
  float* y[kMaxMatvecParts];  // [ncols][n_out_p]
  int64_t begin[kMaxMatvecParts], part_rows[kMaxMatvecParts];
  int n_parts;
  size_t stride;
  int64_t n_out, n_in;        // n_out: rows of all parts
  const int8_t* xq;           // quantized weights: [ncols][n_in]
  const hd::ActScale* xs;     //                    [ncols][n_in / 32]
  const float* xf;            // float weights: [ncols][ldx]
  int64_t ldx;
  int ncols;
};

// Part of row `row` (selects on constant indices: no local-memory copy of the arguments).
struct RowPart {
  const uint8_t* w;
  float* y;
  int64_t begin, rows;
};
__device__ __forceinline__ RowPart row_part(const StreamArgs& a, int64_t row) {
  RowPart p{a.w[0], a.y[0], 0, a.part_rows[0]};
#pragma unroll
  for (int i = 1; i < kMaxMatvecParts; ++i) {
    if (i < a.n_parts && row >= a.begin[i]) p = RowPart{a.w[i], a.y[i], a.begin[i], a.part_rows[i]};
  }
  return p;
}

template <class Dec, int NC, int R>
__global__ void __launch_bounds__(32 * StreamCfg<Dec, NC, R>::kWarps)
    matvec_stream_kernel(const StreamArgs a) {
  using Cfg = StreamCfg<Dec, NC, R>;
  using St = typename Cfg::Staging;
  constexpr int W = Cfg::kWarps, D = Cfg::kDepth, C = St::kChunks;
  extern __shared__ uint4 smem[];  // [W][D][R][C] 16-byte chunks
  // The next kernel, if launched with PDL (the next call's activation kernel), may start now: it
  // waits for this grid's completion before it touches anything this grid reads or writes.
  allow_next_grid();
  const int lane = int(threadIdx.x % 32), wid = int(threadIdx.x / 32);
  const int64_t nw = int64_t(gridDim.x) * W, gw = int64_t(blockIdx.x) * W + wid;
  const int64_t row_begin = hd::warp_row_begin(gw, nw, a.n_out), row_end = hd::warp_row_begin(gw + 1, nw, a.n_out);
  if (row_begin >= row_end) return;  // the whole warp
  const int64_t n_iters = St::iters(a.n_in);
  const int64_t n_stages = (row_end - row_begin + R - 1) / R * n_iters;
  uint4* const ring = smem + size_t(wid) * D * R * C;

  // Copies of the next stage (issue_s: its index; rows from issue_row0, iteration issue_it) into its
  // slot; one commit group per call (empty past the end), so that wait_prior(D - 1) in iteration s
  // always means "stage s has landed". Rows past row_end are not copied (their results are not
  // stored).
  int64_t issue_s = 0, issue_row0 = row_begin, issue_it = 0;
  int issue_slot = 0;
  auto issue = [&]() {
    if (issue_s < n_stages) {
      const auto p = St::plan(issue_it, a.n_in);
      const int64_t off = St::src_offset(p);
      const int chunks = St::chunks(p);
      uint4* const slot = ring + issue_slot * (R * C);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if (issue_row0 + r < row_end) {
          const RowPart rp = row_part(a, issue_row0 + r);
          const uint8_t* src = rp.w + size_t(issue_row0 + r - rp.begin) * a.stride + off;
          for (int k = lane; k < chunks; k += 32) __pipeline_memcpy_async(slot + r * C + k, src + 16 * k, 16);
        }
      }
      if (++issue_it == n_iters) {
        issue_it = 0;
        issue_row0 += R;
      }
      issue_slot = issue_slot + 1 == D ? 0 : issue_slot + 1;
    }
    ++issue_s;
    __pipeline_commit();
  };
#pragma unroll
  for (int k = 0; k < D - 1; ++k) issue();
  wait_for_previous_grid();  // the activations come from the kernel before this one

  float acc[R][NC] = {};
  int64_t row0 = row_begin, it = 0;
  int slot = 0;
  for (int64_t s = 0; s < n_stages; ++s) {
    issue();  // stage s + D - 1, into the slot computed in iteration s - 1
    const auto p = St::plan(it, a.n_in);
    const uint8_t* bufs[R];
#pragma unroll
    for (int r = 0; r < R; ++r) bufs[r] = reinterpret_cast<const uint8_t*>(ring + (slot * R + r) * C);
    constexpr int K = Cfg::kUnitsPerLane;
    if constexpr (St::kQuant) {
      if constexpr (hd::x_first<NC>()) {
        // The activations of the lane's units first (they do not wait for the copies), then the
        // weights: the same arithmetic as hd::staged_lane_step.
        int64_t blk[K];
        int part[K];
        bool has[K];
        hd::XCols<Dec, NC> x[K];
#pragma unroll
        for (int k = 0; k < K; ++k) {
          has[k] = hd::staged_unit<Dec, K>(p, lane, k, blk[k], part[k]);
          if (has[k]) hd::load_x_cols<Dec, NC>(a.xq, a.xs, a.n_in, a.ncols, blk[k], part[k], x[k]);
        }
        __pipeline_wait_prior(D - 1);
        __syncwarp();  // every lane's copies of stage s are visible
#pragma unroll
        for (int k = 0; k < K; ++k) {
          if (has[k]) {
            typename Dec::Unit wu[R];
            hd::staged_decode<Dec, R, K>(bufs, p, blk[k], part[k], wu);
            hd::dot_cols<Dec, NC, R>(wu, x[k], acc);
          }
        }
      } else {
        __pipeline_wait_prior(D - 1);
        __syncwarp();
        hd::staged_lane_step<Dec, NC, R, K>(bufs, p, a.xq, a.xs, a.n_in, a.ncols, lane, acc);
      }
    } else {
      constexpr int V = Dec::kValues;
      if constexpr (hd::x_first<NC>()) {
        hd::XFCols<V, NC> x[K];
#pragma unroll
        for (int k = 0; k < K; ++k)
          if (32 * k + lane < p.nu) hd::load_xf_cols<V, NC>(a.xf, a.ldx, p.u0 + 32 * k + lane, a.ncols, x[k]);
        __pipeline_wait_prior(D - 1);
        __syncwarp();
#pragma unroll
        for (int k = 0; k < K; ++k) {
          const int j = 32 * k + lane;  // the lane's unit of the stage
          if (j < p.nu) {
            hd::FUnit<V> wu[R];
#pragma unroll
            for (int r = 0; r < R; ++r)
              hd::load_float_unit_at<Dec, true>(bufs[r] + 16 * j, (p.u0 + j) * V, a.n_in, wu[r]);
            hd::float_dot_cols<V, NC, R>(wu, x[k], acc);
          }
        }
      } else {
        __pipeline_wait_prior(D - 1);
        __syncwarp();
        hd::staged_lane_step_f<Dec, NC, R, K>(bufs, p, a.xf, a.ldx, a.n_in, a.ncols, lane, acc);
      }
    }
    __syncwarp();  // the slot is refilled by the next iteration's issue
    slot = slot + 1 == D ? 0 : slot + 1;
    if (++it == n_iters) {
      // Every lane holds every (r, c) sum after warp_sum; lane r * NC + c stores one.
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const RowPart rp = row_part(a, row0 + r);
#pragma unroll
        for (int c = 0; c < NC; ++c) {
          const float v = hd::warp_sum(acc[r][c]);
          acc[r][c] = 0.0f;
          if (lane == r * NC + c && c < a.ncols && row0 + r < row_end)
            rp.y[int64_t(c) * rp.rows + row0 + r - rp.begin] = v;
        }
      }
      it = 0;
      row0 += R;
    }
  }
}

// ---- host side ----

int g_force_rows = 0;  // set_matvec_rows_per_warp
bool g_pdl = true;     // set_matvec_pdl

constexpr int kMaxDevices = 64;

// Blocks of the kernel one SM holds (occupancy), per device; the first call per device also lets the
// kernel use its shared memory (> 48 KB needs the opt-in) and prefer shared memory to L1.
template <class Dec, int NC, int R>
int stream_blocks_per_sm(int device) {
  using Cfg = StreamCfg<Dec, NC, R>;
  static std::atomic<int> cache[kMaxDevices];
  check(device >= 0 && device < kMaxDevices, "CUDA matvec: device ", device, " out of range");
  int n = cache[device].load(std::memory_order_relaxed);
  if (n > 0) return n;
  auto kernel = matvec_stream_kernel<Dec, NC, R>;
  POLYKV_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(Cfg::kSmem)));
  POLYKV_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, int(cudaSharedmemCarveoutMaxShared)));
  POLYKV_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, 32 * Cfg::kWarps, Cfg::kSmem));
  check(n > 0, "CUDA matvec: the stream kernel does not fit on an SM (", Cfg::kSmem, " bytes of shared memory)");
  cache[device].store(n, std::memory_order_relaxed);
  return n;
}

// The widest rows per warp for Dec and NC (hd::rows_per_warp_q / _f).
template <class Dec, int NC>
constexpr int max_rows_per_warp() {
  if constexpr (is_quant_dec<Dec>())
    return hd::rows_per_warp_q<Dec, NC>();
  else
    return hd::rows_per_warp_f<Dec, NC>();
}

template <class Dec, int NC, int R>
StreamPlan plan_for(const WeightMatrix& w, CudaContext& ctx) {
  using Cfg = StreamCfg<Dec, NC, R>;
  StreamPlan p;
  p.rows_per_warp = R;
  p.warps_per_block = Cfg::kWarps;
  p.depth = Cfg::kDepth;
  p.smem = Cfg::kSmem;
  p.blocks_per_sm = stream_blocks_per_sm<Dec, NC, R>(ctx.device());
  // Enough warps for every row group, at most what the GPU holds at once.
  const int64_t groups = (w.n_out + R - 1) / R;
  const int64_t want = (groups + Cfg::kWarps - 1) / Cfg::kWarps;
  const int64_t cap = int64_t(ctx.sm_count()) * p.blocks_per_sm;
  p.grid = int(std::max<int64_t>(1, std::min(want, cap)));
  return p;
}

// R = the widest when the matrix gives every warp the GPU holds at least that many rows, else 1
// (more warps, each on fewer rows: the small matrices' parallelism); or what set_matvec_rows_per_warp
// forces (1, or > 1: the widest).
template <class Dec, int NC, class Fn>
void with_rows_per_warp(const WeightMatrix& w, CudaContext& ctx, Fn&& fn) {
  constexpr int Rmax = max_rows_per_warp<Dec, NC>();
  bool wide;
  if (g_force_rows > 0) {
    wide = g_force_rows > 1;
  } else {
    const StreamPlan p = plan_for<Dec, NC, Rmax>(w, ctx);
    const int64_t cap_warps = int64_t(ctx.sm_count()) * p.blocks_per_sm * p.warps_per_block;
    wide = w.n_out >= Rmax * cap_warps;
  }
  if (wide)
    fn(std::integral_constant<int, Rmax>{});
  else
    fn(std::integral_constant<int, 1>{});
}

// `all`: parts[0]'s matrix with n_out = the rows of every part (what the plan is sized by).
template <class Dec, int NC, int R>
void launch(std::span<const MatvecPart> parts, const WeightMatrix& all, const ActView& av, int col0, int ncols,
            CudaContext& ctx) {
  using Cfg = StreamCfg<Dec, NC, R>;
  const StreamPlan p = plan_for<Dec, NC, R>(all, ctx);
  StreamArgs a{};
  a.n_parts = int(parts.size());
  int64_t begin = 0;
  for (int i = 0; i < kMaxMatvecParts; ++i) {
    const MatvecPart& part = parts[size_t(std::min(i, a.n_parts - 1))];  // unused slots repeat the last part
    a.w[i] = static_cast<const uint8_t*>(part.w->data);
    a.y[i] = part.y + int64_t(col0) * part.w->n_out;
    a.part_rows[i] = part.w->n_out;
    a.begin[i] = begin;
    if (i < a.n_parts) begin += part.w->n_out;
  }
  a.stride = all.row_stride;
  a.n_out = all.n_out;
  a.n_in = all.n_in;
  if constexpr (is_quant_dec<Dec>()) {
    a.xq = av.qs + int64_t(col0) * all.n_in;
    a.xs = av.s + int64_t(col0) * (all.n_in / hd::kActBlock);
    a.xf = nullptr;
    a.ldx = 0;
  } else {
    a.xq = nullptr;
    a.xs = nullptr;
    a.xf = av.xf + int64_t(col0) * av.ldx;
    a.ldx = av.ldx;
  }
  a.ncols = ncols;
  launch_kernel(matvec_stream_kernel<Dec, NC, R>, dim3(unsigned(p.grid)), dim3(32 * Cfg::kWarps), Cfg::kSmem,
                ctx.stream(), matvec_pdl(ctx), a);
}

// The narrowest kernel width that holds ncols columns (its extra columns repeat the last one and are
// not stored; the width does not change any result).
template <class Fn>
void by_width(int ncols, Fn&& fn) {
  if (ncols == 1) fn(std::integral_constant<int, 1>{});
  else if (ncols == 2) fn(std::integral_constant<int, 2>{});
  else if (ncols <= 4) fn(std::integral_constant<int, 4>{});
  else fn(std::integral_constant<int, 8>{});
}

template <class Fn>
bool visit_decoder(DType t, Fn&& fn) {
  return hd::visit_quant_decoder(t, fn) || hd::visit_float_decoder(t, fn);
}

}  // namespace

bool stream_rows(const WeightMatrix& w) {
  return w.layout == WeightLayout::Rows && hd::common_alignment(reinterpret_cast<uintptr_t>(w.data), w.row_stride) >= 16;
}

bool parts_stream_together(std::span<const MatvecPart> parts) {
  if (parts.empty() || parts.size() > size_t(kMaxMatvecParts)) return false;
  const WeightMatrix& w0 = *parts[0].w;
  if (w0.layout == WeightLayout::CudaSplit) {  // the split kernel's conditions
    for (const MatvecPart& p : parts) {
      const WeightMatrix& w = *p.w;
      if (w.layout != w0.layout || w.type != w0.type || w.n_in != w0.n_in || w.row_stride != w0.row_stride ||
          w.n_out <= 0)
        return false;
    }
    return true;
  }
  for (const MatvecPart& p : parts) {
    const WeightMatrix& w = *p.w;
    if (w.layout != w0.layout || w.type != w0.type || w.n_in != w0.n_in || w.row_stride != w0.row_stride || w.n_out <= 0 || !stream_rows(w))
      return false;
  }
  return true;
}

bool launch_matvec_stream_parts(std::span<const MatvecPart> parts, const ActView& a, int col0, int ncols,
                                CudaContext& ctx) {
  if (launch_matvec_split_parts(parts, a, col0, ncols, ctx)) return true;  // weights in the split layout
  check(a.dn.ss == nullptr, "CUDA matvec: a deferred norm needs split weights");
  if (!parts_stream_together(parts)) return false;
  WeightMatrix all = *parts[0].w;
  all.n_out = 0;
  for (const MatvecPart& p : parts) all.n_out += p.w->n_out;
  const bool done = visit_decoder(all.type, [&](auto dec) {
    using Dec = decltype(dec);
    by_width(ncols, [&](auto nc) {
      constexpr int NC = decltype(nc)::value;
      with_rows_per_warp<Dec, NC>(all, ctx, [&](auto r) {
        launch<Dec, NC, decltype(r)::value>(parts, all, a, col0, ncols, ctx);
      });
    });
  });
  check(done, "CUDA matmul: no kernel for weight type ", dtype_name(all.type));
  return true;
}

bool launch_matvec_stream(const WeightMatrix& w, const ActView& a, int col0, int ncols, float* y, CudaContext& ctx) {
  const MatvecPart part{&w, y};
  return launch_matvec_stream_parts(std::span<const MatvecPart>(&part, 1), a, col0, ncols, ctx);
}

StreamPlan stream_plan(const WeightMatrix& w, int ncols, CudaContext& ctx) {
  StreamPlan out;
  if (!stream_rows(w)) return out;
  visit_decoder(w.type, [&](auto dec) {
    using Dec = decltype(dec);
    by_width(ncols, [&](auto nc) {
      constexpr int NC = decltype(nc)::value;
      with_rows_per_warp<Dec, NC>(w, ctx, [&](auto r) { out = plan_for<Dec, NC, decltype(r)::value>(w, ctx); });
    });
  });
  return out;
}

void set_matvec_rows_per_warp(int r) { g_force_rows = r; }
void set_matvec_pdl(bool on) { g_pdl = on; }
bool matvec_pdl(const CudaContext& ctx) { return g_pdl && ctx.cc_major() >= 9; }
bool pdl_enabled(const CudaContext& ctx) { return matvec_pdl(ctx); }
void set_pdl_enabled(bool on) { g_pdl = on; }

}  // namespace polykv::cuda
