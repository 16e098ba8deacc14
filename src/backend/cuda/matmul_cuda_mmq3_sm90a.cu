// The quantized mat-mul on Hopper's warpgroup MMA ("mmq3", sm_90a only; docs/CUDA_MMQ.md "wgmma").
// CMake compiles this file for sm_90a alone; matmul_cuda_mmq.cu launches it on a device of compute
// capability 9.0 when the build has it (POLYKV_CUDA_SM90A) and POLYKV_CUDA_MMQ_WGMMA is not 0.
//
// The mma.sync kernel (matmul_cuda_mmq2.cu) with its weights, A fragments and cp.async ring unchanged,
// but each k-step's products are two wgmma m64nNk16 per warpgroup (one per m16 tile of its warps)
// instead of 2 x NT mma.sync per warp, and the activations go from shared memory to the tensor cores
// without passing through registers. Per k-step and warp: the A fragments (dequantized in registers as
// before), one wgmma.fence, 2 wgmma, a commit and a wait for the k-step before; the mma.sync kernel
// issued 2 NT mma's and NT / 2 16-byte shared loads there. The wgmmas of a k-step run while the warp
// dequantizes the next one.
//
// The ring has 4 stages: while chunk i is computed, chunks i + 1 .. i + 3 are being copied (the mma.sync
// kernel keeps 2 in flight at 64 columns). A warp waits for all its wgmmas at the end of a chunk, so
// after the barrier at the top of iteration i chunk i - 1's stage is free to be refilled with chunk i + 3.
// (Keeping the last group in flight across the barrier, with 2 chunks in flight, measured the same in
// calls W2 / W3: 3197-3278 vs 3230-3287 tok/s at 64 agents; removed. Its accumulators needed a first
// wgmma with scale_d = 0: a zeroing move reaching a group in flight across the loop's back edge makes
// ptxas serialize every wgmma, warning C7515.)
// Within a chunk, per k-step: one fence, the 2 wgmmas, one commit, and a wait for the k-step before
// (wgmma.wait_group 1), so a k-step's products run while the warp dequantizes the next. Two k-steps per
// commit group and/or two groups in flight measured the same (call W4: 179.1-181.5 us a q4_0 layer at 64
// columns for all four; removed).
//
// Activations: the permuted x (matmul_cuda_mmq_stage.cuh, mmq3_x_source), each core matrix 128 contiguous
// bytes in global and shared memory.
//
// Numbers: the same f16 weights and activations as the mma.sync kernel, f32 sums in the tensor core's
// order, the K split of the mma.sync kernel's plan. On the H200 the results are the mma.sync kernel's bit
// for bit (every type, 9 / 24 / 64 columns: MmqCuda.WgmmaAgainstMmaSync, call W1); PTX does not promise
// it, so the tests hold it to the references' bound and to batch invariance (a column's bits do not
// depend on the column count, which picks N: MmqCuda.BatchInvariant).
#include <cuda_fp16.h>

#include <algorithm>
#include <span>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/matmul_cuda_mmq2.h"
#include "backend/cuda/matmul_cuda_mmq_stage.cuh"
#include "backend/cuda/mma_fragments.cuh"
#include "backend/cuda/wgmma.cuh"
#include "core/error.h"

namespace polykv::cuda {
namespace {

constexpr int kThreads = hd::kMmq2Rows;  // 8 warps = 2 warpgroups, two m16 tiles per warp: 256 rows
constexpr int kMT = 2;
template <class T>
constexpr bool kHalf = hd::mmq_half_dequant<T>();

// Up to kMaxMatvecParts matrices of one type and n_in in one launch (matmul_parts: q, k, v; gate, up):
// grid x is every part's row blocks in part order, grid y the most splits of any part; each part keeps the
// split plan it has alone (a CTA past its part's splits exits), so its results are matmul()'s bit for bit.
struct Mmq3Part {
  const uint8_t* w;          // split rows
  int64_t n_out;
  float* out;                // [splits][ncols][n_out] partials, or y [ncols][n_out] (one split)
  int64_t rb_begin;          // first row block (grid x) of the part
  int64_t chunks_per_split;
  int splits;
};
struct Mmq3Args {
  Mmq3Part part[kMaxMatvecParts];
  int n_parts;
  size_t stride;
  hd::SplitGeom geom;
  const __half* x;   // permuted x of the launch's first column group
  int n_groups;      // column groups of 8 in the permuted x from x on
  int ncols;         // 1..kMmqMaxCols
  int64_t n_chunks;
};

// A CTA's share: its part's rows and chunk range.
struct Mmq3Job {
  const uint8_t* w;
  int64_t n_out, row_base, c_begin, n_my;
  float* out;  // this split's [ncols][n_out]
};

using mma::cp_async;

// A thread's share of the copies of a chunk into a stage: the weights as the mma.sync kernel stages them
// (region A: kA 16-byte pieces of rows spread over consecutive lanes; region B: its own row's heads), then
// the NT column groups' 16 core matrices each (8 threads a core matrix: 128 contiguous bytes both sides).
// The addresses are set up once: chunk c's A piece is chunk 0's plus c times the row's bytes per chunk, its x
// rows chunk 0's plus c x 2 KB (mmq3_x_global_offset). (Computed per chunk, the copy code was roughly a
// quarter of a small launch's warp instructions by W2's SASS regions, attributed by opcode mix; setting it
// up once measured the same time in W3, and is kept as the simpler form.)
template <class T, int NT>
struct Stager {
  using G = hd::MmqStage<T>;
  static constexpr int kA = G::kPiecesA * hd::kMmq2Rows / kThreads;        // A pieces per thread
  static constexpr int kX = (NT * 16 * 8 + kThreads - 1) / kThreads;       // x rows per thread (at most)
  static constexpr int kXChunkBytes = 16 * hd::kMmq3CoreBytes;             // a column group's chunk
  const uint8_t* a_src[kA];  // chunk 0's piece of the row
  int a_dst[kA], a_piece[kA];
  int64_t a_step;            // bytes of a row's quants per chunk
  const uint8_t* row;        // the row whose heads this thread copies
  int b_dst;
  const uint8_t* x_src[kX];  // chunk 0's core-matrix row
  int x_dst[kX];
  bool x_valid[kX], x_any[kX];

  __device__ __forceinline__ Stager(const Mmq3Args& a, const Mmq3Job& job, int tid) {
    const int64_t row_base = job.row_base;
#pragma unroll
    for (int k = 0; k < kA; ++k) {
      const int i = k * kThreads + tid, r = i / G::kPiecesA, pk = i % G::kPiecesA;
      const uint8_t* rw = job.w + size_t(min(row_base + r, job.n_out - 1)) * a.stride;
      a_src[k] = rw + G::piece(a.geom, 0, pk).src;
      a_dst[k] = r * G::kPitchA + 16 * pk;
      a_piece[k] = pk;
    }
    a_step = G::piece(a.geom, 1, 0).src - G::piece(a.geom, 0, 0).src;
    row = job.w + size_t(min(row_base + tid, job.n_out - 1)) * a.stride;
    b_dst = hd::kMmq2Rows * G::kPitchA + tid * G::kPitchB;
    const uint8_t* xb = reinterpret_cast<const uint8_t*>(a.x);
#pragma unroll
    for (int k = 0; k < kX; ++k) {
      const int i = k * kThreads + tid;
      const int r = i % 8, m = (i / 8) % 16, cg = i / 128;  // m = 2 j + h
      x_any[k] = i < NT * 16 * 8;
      x_valid[k] = cg < a.n_groups;
      x_src[k] = xb + (x_valid[k] ? hd::mmq3_x_global_offset(a.n_chunks, cg, 0, m / 2, m % 2) + 16 * r : 0);
      x_dst[k] = hd::kMmq2Rows * (G::kPitchA + G::kPitchB) + hd::mmq3_x_stage_offset(NT, m / 2, cg, m % 2) + 16 * r;
    }
  }

  // Issues chunk c's copies into stage st (no commit).
  __device__ __forceinline__ void copy(const Mmq3Args& a, uint8_t* st, int64_t c) const {
#pragma unroll
    for (int k = 0; k < kA; ++k) {
      const bool valid = G::piece(a.geom, c, a_piece[k]).valid;
      cp_async<16>(st + a_dst[k], valid ? a_src[k] + c * a_step : a_src[k], valid);
    }
#pragma unroll
    for (int k = G::kPiecesA; k < G::kPieces; ++k) {
      const hd::MmqPiece p = G::piece(a.geom, c, k);
      uint8_t* dst = st + b_dst + p.dst;
      const uint8_t* src = p.valid ? row + p.src : row;
      mma::cp_async_bytes(dst, src, p.bytes, p.valid);
    }
#pragma unroll
    for (int k = 0; k < kX; ++k)
      if (x_any[k]) cp_async<16>(st + x_dst[k], x_valid[k] ? x_src[k] + c * kXChunkBytes : x_src[k], x_valid[k]);
  }
};

template <class T, int NT, bool HALF>
__global__ void __launch_bounds__(kThreads, 1) mmq3_kernel(const Mmq3Args a) {
  static_assert(!HALF || hd::mmq_half_dequant<T>(), "f16 dequantization for q4_0 / q8_0 only");
  using G = hd::MmqStage<T>;
  constexpr int kNR = 2 * kMT;  // rows per thread
  constexpr int kStageBytes = hd::mmq3_stage_bytes<T>(NT);
  constexpr int kStages = hd::kMmq3Stages;
  constexpr int kAhead = kStages - 1;  // chunks in flight while one is computed
  extern __shared__ __align__(128) uint8_t smem[];
  const int tid = int(threadIdx.x);
  const int lane = tid % 32, warp = tid / 32;
  const int g = lane / 4, t = lane % 4;
  int p = 0;
  while (p + 1 < a.n_parts && int64_t(blockIdx.x) >= a.part[p + 1].rb_begin) ++p;
  const Mmq3Part& part = a.part[p];
  if (int(blockIdx.y) >= part.splits) return;  // the whole CTA: no barrier passed yet
  Mmq3Job job;
  job.w = part.w;
  job.n_out = part.n_out;
  job.row_base = (int64_t(blockIdx.x) - part.rb_begin) * hd::kMmq2Rows;
  job.c_begin = int64_t(blockIdx.y) * part.chunks_per_split;
  job.n_my = min(job.c_begin + part.chunks_per_split, a.n_chunks) - job.c_begin;
  job.out = part.out + int64_t(blockIdx.y) * a.ncols * part.n_out;
  const int64_t row_base = job.row_base, c_begin = job.c_begin, n_my = job.n_my;

  const Stager<T, NT> stager(a, job, tid);
  // Prologue: chunks 0 .. kAhead - 1 of the split in flight (one commit group each, empty or not).
#pragma unroll
  for (int s = 0; s < kAhead; ++s) {
    if (s < n_my) stager.copy(a, smem + s * kStageBytes, c_begin + s);
    mma::cp_async_commit();
  }

  float acc[kMT][4 * NT];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int k = 0; k < 4 * NT; ++k) acc[mt][k] = 0.0f;

  for (int64_t i = 0; i < n_my; ++i) {
    // Chunk i has landed for this thread; the proxy fence makes its copies visible to the wgmmas, the
    // barrier every thread's. Every warp has waited for its wgmmas of chunk i - 1.
    mma::cp_async_wait<kAhead - 1>();
    wg::fence_proxy_async();
    __syncthreads();
    {
      const int64_t nxt = i + kAhead;
      if (nxt < n_my) stager.copy(a, smem + int(nxt % kStages) * kStageBytes, c_begin + nxt);
      mma::cp_async_commit();
    }
    const int64_t c = c_begin + i;
    const uint8_t* st = smem + int(i % kStages) * kStageBytes;
    const uint8_t* sa = st;
    const uint8_t* sb = st + hd::kMmq2Rows * G::kPitchA;
    const uint32_t sx = wg::smem_u32(sb + hd::kMmq2Rows * G::kPitchB);
    const bool has = hd::kMmqUnitsPerChunk * c + t < a.geom.n_units;  // this thread's unit
    typename T::Unit wu[kNR];
    uint32_t d2[kNR];  // HALF: the unit's f16 d twice (0 for a unit past the row's end)
    hd::mmq_stage_units<T, kNR>(sa, sb, warp * 16 * kMT, g, t, c, a.geom, wu, d2);
#pragma unroll
    for (int j = 0; j < hd::kMmqStepsPerChunk; ++j) {
      uint32_t af[kMT][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        if constexpr (HALF)
          hd::mmq_a_fragment_half<T>(wu[2 * mt], wu[2 * mt + 1], j, d2[2 * mt], d2[2 * mt + 1], af[mt]);
        else
          hd::mmq_a_fragment(wu[2 * mt], wu[2 * mt + 1], j, has, af[mt]);
      }
      const uint64_t desc = wg::desc_k_major(sx + uint32_t(hd::mmq3_x_stage_offset(NT, j, 0, 0)),
                                             hd::kMmq3CoreBytes, 2 * hd::kMmq3CoreBytes);
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) wg::pin(acc[mt]);
      wg::fence();
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) wg::wgmma_rs(acc[mt], af[mt], desc);
      wg::commit();
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) wg::pin(acc[mt]);
      wg::wait<1>();
    }
    wg::wait<0>();
  }
  wg::wait<0>();
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) wg::pin(acc[mt]);
  mma::cp_async_wait<0>();

  hd::mmq_store_tiles<kMT, NT>(job.out, job.n_out, a.ncols, row_base + 16 * kMT * warp, g, t,
                               [&](int mt, int nt, int k) { return acc[mt][4 * nt + k]; });
}

template <class T, int NT>
void allow_smem() {
  POLYKV_CUDA_CHECK(cudaFuncSetAttribute(mmq3_kernel<T, NT, kHalf<T>>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         hd::mmq3_smem_bytes<T>(NT)));
}

// Once per type, outside any capture (the backend's first run of a step is eager): every instance may
// take its shared memory; the CTAs per SM of the 8-n-tile instance set the split plan for every column
// count (batch invariance).
template <class T>
int prepare_type() {
  static int per_sm = 0;
  if (per_sm == 0) {
    allow_smem<T, 1>();
    allow_smem<T, 2>();
    allow_smem<T, 4>();
    allow_smem<T, 8>();
    int n = 0;
    POLYKV_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, mmq3_kernel<T, 8, kHalf<T>>, kThreads,
                                                                    hd::mmq3_smem_bytes<T>(8)));
    check(n >= 1, "CUDA mmq (wgmma): a kernel of ", T::kBlockBytes, "-byte blocks does not fit an SM");
    per_sm = n;
  }
  return per_sm;
}

template <class T, int NT>
void launch_nt(const dim3 grid, const Mmq3Args& a, cudaStream_t s) {
  mmq3_kernel<T, NT, kHalf<T>><<<grid, kThreads, hd::mmq3_smem_bytes<T>(NT), s>>>(a);
  POLYKV_CUDA_LAUNCHED();
}

template <class T>
void launch_type(std::span<const MatvecPart> parts, const __half* xw, int n, CudaContext& ctx, int forced_splits) {
  const WeightMatrix& w0 = *parts[0].w;
  const hd::SplitGeom geom = hd::split_geom<T>(w0.n_in);
  const int per_sm = prepare_type<T>();
  const cudaStream_t s = ctx.stream();
  const int n_groups = (n + 7) / 8;
  const int np = int(parts.size());
  hd::MmqPlan plan[kMaxMatvecParts];
  int64_t row_blocks = 0;
  int max_splits = 1;
  for (int p = 0; p < np; ++p) {
    plan[p] = hd::mmq2_plan(parts[p].w->n_out, geom.n_units, ctx.sm_count(), per_sm, forced_splits);
    row_blocks += plan[p].row_blocks;
    max_splits = std::max(max_splits, plan[p].splits);
  }
  for (int c0 = 0; c0 < n; c0 += hd::kMmqMaxCols) {
    const int ncols = std::min(hd::kMmqMaxCols, n - c0);
    // The parts' K-split partials, one after another in the MatmulWeights scratch.
    size_t partial_floats = 0;
    for (int p = 0; p < np; ++p)
      if (plan[p].splits > 1) partial_floats += size_t(plan[p].splits) * size_t(ncols) * size_t(parts[p].w->n_out);
    float* partials = partial_floats > 0
                          ? static_cast<float*>(ctx.scratch(Scratch::MatmulWeights, partial_floats * sizeof(float)))
                          : nullptr;
    Mmq3Args a{};
    a.n_parts = np;
    a.stride = w0.row_stride;
    a.geom = geom;
    a.x = xw + (c0 / 8) * plan[0].n_chunks * hd::kMmq3GroupChunkHalves;
    a.n_groups = n_groups - c0 / 8;
    a.ncols = ncols;
    a.n_chunks = plan[0].n_chunks;
    int64_t rb = 0;
    size_t used = 0;
    for (int p = 0; p < np; ++p) {
      const WeightMatrix& w = *parts[p].w;
      Mmq3Part& q = a.part[p];
      q.w = static_cast<const uint8_t*>(w.data);
      q.n_out = w.n_out;
      q.rb_begin = rb;
      q.chunks_per_split = plan[p].chunks_per_split;
      q.splits = plan[p].splits;
      q.out = parts[p].y + int64_t(c0) * w.n_out;
      if (plan[p].splits > 1) {
        q.out = partials + used;
        used += size_t(plan[p].splits) * size_t(ncols) * size_t(w.n_out);
      }
      rb += plan[p].row_blocks;
    }
    const dim3 grid{unsigned(row_blocks), unsigned(max_splits)};
    switch (hd::mmq_tiles(ncols)) {
      case 1: launch_nt<T, 1>(grid, a, s); break;
      case 2: launch_nt<T, 2>(grid, a, s); break;
      case 4: launch_nt<T, 4>(grid, a, s); break;
      default: launch_nt<T, 8>(grid, a, s); break;
    }
    for (int p = 0; p < np; ++p)
      if (plan[p].splits > 1)
        mmq2_reduce_splits(a.part[p].out, plan[p].splits, int64_t(ncols) * parts[p].w->n_out,
                           parts[p].y + int64_t(c0) * parts[p].w->n_out, s);
  }
}

}  // namespace

void mmq3_launch_parts(std::span<const MatvecPart> parts, const __half* xw, int n, CudaContext& ctx,
                       int forced_splits) {
  check(!parts.empty() && parts.size() <= size_t(kMaxMatvecParts), "CUDA mmq (wgmma): ", parts.size(), " parts");
  for (const MatvecPart& p : parts)
    check(p.w->type == parts[0].w->type && p.w->n_in == parts[0].w->n_in && p.w->row_stride == parts[0].w->row_stride,
          "CUDA mmq (wgmma): parts of one launch need one type, n_in and row stride");
  const bool done = hd::visit_split_decoder(parts[0].w->type, [&](auto dec) {
    using T = decltype(dec);
    if constexpr (hd::mmq_type<T>()) launch_type<T>(parts, xw, n, ctx, forced_splits);
  });
  check(done, "CUDA mmq (wgmma): no kernel for ", dtype_name(parts[0].w->type));
}

void mmq3_launch(const WeightMatrix& w, const __half* xw, float* y, int n, CudaContext& ctx, int forced_splits) {
  const MatvecPart part{&w, y};
  mmq3_launch_parts(std::span<const MatvecPart>(&part, 1), xw, n, ctx, forced_splits);
}

}  // namespace polykv::cuda
