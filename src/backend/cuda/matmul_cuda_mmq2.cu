// The quantized mat-mul on tensor cores ("mmq", matmul_cuda_mmq.cu dispatches to it), fed from a cp.async
// ring in shared memory (matmul_cuda_mmq_stage.cuh has the staged layout, docs/CUDA_MMQ.md the counts
// that motivate it).
//
// A CTA of 8 warps owns 256 rows and all the launch's columns; 3 or 4 chunks of weights (the row's unit
// bytes and heads) and of x (f16, all columns, reordered into fragment order) are copied by cp.async 2
// or 3 chunks ahead of the compute (hd::mmq2_stages); a warp reads its units and its B fragments from
// shared memory (one 16-byte load per n tile gives two k-steps), so no global load sits in the mma loop.
// q4_0 / q8_0 weights are dequantized by f16 arithmetic (hd::mmq_a_fragment_half, "v3"), the K-quants by
// f32 arithmetic rounded to f16 (hd::mmq_a_fragment, "v2"): the same f16 values either way.
// (Kernel v1, registers only, 128 rows per CTA, and v4, 16 warps of one m16 tile, were removed
// 2026-12-01f; last in commit daaf86c; docs/CUDA_MMQ.md has their measurements.)
#include <cuda_fp16.h>

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/matmul_cuda_mmq2.h"
#include "backend/cuda/matmul_cuda_mmq_stage.cuh"
#include "backend/cuda/mma_fragments.cuh"
#include "core/error.h"

namespace polykv::cuda {
namespace {

// 8 warps of two m16 tiles: 256 rows per CTA.
constexpr int kThreads = hd::kMmq2Rows;
constexpr int kMT = 2;  // m16 tiles per warp
// q4_0 / q8_0 take f16 dequantization (kernel "v3": 0.70x v2's time on the H200), the K-quants f32.
template <class T>
constexpr bool kHalf = hd::mmq_half_dequant<T>();

struct Mmq2Args {
  const uint8_t* w;   // split rows
  size_t stride;
  hd::SplitGeom geom;
  int64_t n_out, n_in;
  const __half* x;    // [ncols][n_in], the launch's first column
  int ncols;          // 1..kMmqMaxCols
  float* out;         // [splits][ncols][n_out] partials, or y [ncols][n_out] (one split)
  int64_t chunks_per_split, n_chunks;
};

using mma::cp_async;

// Issues the copies of chunk c into stage `st`. Region A: piece i = k kThreads + tid (k < kPiecesA) is
// piece i % kPiecesA of CTA row i / kPiecesA, so consecutive lanes read consecutive 16 bytes of a row
// (whole sectors); region B: thread tid copies CTA row tid's other pieces. A row past n_out reads the
// last row (its results are not stored). Then the thread's share of the 8 NT x 16 activation slots.
template <class T, int NT>
__device__ __forceinline__ void stage_chunk(const Mmq2Args& a, uint8_t* st, int64_t row_base, int64_t c, int tid) {
  using G = hd::MmqStage<T>;
  uint8_t* sa = st;
  uint8_t* sb = st + hd::kMmq2Rows * G::kPitchA;
  uint8_t* sx = sb + hd::kMmq2Rows * G::kPitchB;
#pragma unroll
  for (int k = 0; k < G::kPiecesA * hd::kMmq2Rows / kThreads; ++k) {
    const int i = k * kThreads + tid, r = i / G::kPiecesA, pk = i % G::kPiecesA;
    const uint8_t* row = a.w + size_t(min(row_base + r, a.n_out - 1)) * a.stride;
    const hd::MmqPiece p = G::piece(a.geom, c, pk);
    cp_async<16>(sa + r * G::kPitchA + 16 * pk, p.valid ? row + p.src : row, p.valid);
  }
  const uint8_t* row = a.w + size_t(min(row_base + tid, a.n_out - 1)) * a.stride;
#pragma unroll
  for (int k = G::kPiecesA; k < G::kPieces; ++k) {
    const hd::MmqPiece p = G::piece(a.geom, c, k);
    uint8_t* dst = sb + tid * G::kPitchB + p.dst;
    const uint8_t* src = p.valid ? row + p.src : row;
    mma::cp_async_bytes(dst, src, p.bytes, p.valid);
  }
  constexpr int kSlots = 8 * NT * hd::kMmq2XSlots;
#pragma unroll
  for (int i = tid; i < kSlots; i += kThreads) {
    const int col = i / hd::kMmq2XSlots, s = i % hd::kMmq2XSlots;
    const bool valid = hd::mmq_unit_valid(a.geom, c, s % 4);
    const __half* src = a.x + int64_t(min(col, a.ncols - 1)) * a.n_in + (valid ? hd::mmq_x_slot_pos<T>(c, s) : 0);
    cp_async<16>(sx + col * hd::kMmq2XPitch + 16 * s, src, valid);
  }
}

// 256 rows (8 warps x two m16 tiles) x 8 NT columns, K chunks of grid y's split. HALF (q4_0 / q8_0
// only): A fragments by f16 arithmetic (hd::mmq_a_fragment_half, the same f16 values).
template <class T, int NT, bool HALF>
__global__ void __launch_bounds__(kThreads, 1) mmq2_kernel(const Mmq2Args a) {
  static_assert(!HALF || hd::mmq_half_dequant<T>(), "f16 dequantization for q4_0 / q8_0 only");
  using G = hd::MmqStage<T>;
  constexpr int kNR = 2 * kMT;  // rows per thread
  constexpr int kStageBytes = hd::mmq2_stage_bytes<T>(NT);
  constexpr int kStages = hd::mmq2_stages(NT);
  extern __shared__ __align__(16) uint8_t smem[];
  const int tid = int(threadIdx.x);
  const int lane = tid % 32, warp = tid / 32;
  const int g = lane / 4, t = lane % 4;
  const int64_t row_base = int64_t(blockIdx.x) * hd::kMmq2Rows;
  const int64_t c_begin = int64_t(blockIdx.y) * a.chunks_per_split;
  const int64_t c_end = min(c_begin + a.chunks_per_split, a.n_chunks);
  const int64_t n_my = c_end - c_begin;

  // Prologue: chunks 0 .. kStages - 2 of the split in flight (one commit group each, empty or not).
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < n_my) stage_chunk<T, NT>(a, smem + s * kStageBytes, row_base, c_begin + s, tid);
    mma::cp_async_commit();
  }

  float acc[kMT][NT][4] = {};
  for (int64_t i = 0; i < n_my; ++i) {
    // Chunk i has landed (for this thread; the barrier makes every thread's copies visible, and
    // every warp has finished with chunk i - 1, whose stage is refilled next).
    mma::cp_async_wait<kStages - 2>();
    __syncthreads();
    {
      const int64_t nxt = i + kStages - 1;
      if (nxt < n_my)
        stage_chunk<T, NT>(a, smem + int(nxt % kStages) * kStageBytes, row_base, c_begin + nxt, tid);
      mma::cp_async_commit();
    }
    const int64_t c = c_begin + i;
    const uint8_t* st = smem + int(i % kStages) * kStageBytes;
    const uint8_t* sa = st;
    const uint8_t* sb = st + hd::kMmq2Rows * G::kPitchA;
    const uint8_t* sx = sb + hd::kMmq2Rows * G::kPitchB;
    const bool has = hd::kMmqUnitsPerChunk * c + t < a.geom.n_units;  // this thread's unit
    typename T::Unit wu[kNR];
    uint32_t d2[kNR];  // HALF: the unit's f16 d twice (0 for a unit past the row's end)
    hd::mmq_stage_units<T, kNR>(sa, sb, warp * 16 * kMT, g, t, c, a.geom, wu, d2);
#pragma unroll
    for (int jp = 0; jp < hd::kMmqStepsPerChunk / 2; ++jp) {
      // A fragments of k-steps 2 jp and 2 jp + 1 (16 registers), then per n tile one 16-byte load of
      // both steps' B fragments and 2 x kMT mma's.
      uint32_t af[2][kMT][4];
#pragma unroll
      for (int jj = 0; jj < 2; ++jj) {
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          if constexpr (HALF)
            hd::mmq_a_fragment_half<T>(wu[2 * mt], wu[2 * mt + 1], 2 * jp + jj, d2[2 * mt], d2[2 * mt + 1], af[jj][mt]);
          else
            hd::mmq_a_fragment(wu[2 * mt], wu[2 * mt + 1], 2 * jp + jj, has, af[jj][mt]);
        }
      }
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        uint32_t b[4];
        hd::st_ld16(sx + (8 * nt + g) * hd::kMmq2XPitch + 16 * (4 * jp + t), b);
#pragma unroll
        for (int jj = 0; jj < 2; ++jj) {
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt) mma::m16n8k16(acc[mt][nt], af[jj][mt], b[2 * jj], b[2 * jj + 1]);
        }
      }
    }
  }
  mma::cp_async_wait<0>();

  float* out = a.out + int64_t(blockIdx.y) * a.ncols * a.n_out;
  hd::mmq_store_tiles<kMT, NT>(out, a.n_out, a.ncols, row_base + 16 * kMT * warp, g, t,
                               [&](int mt, int nt, int k) { return acc[mt][nt][k]; });
}

// y[i] = partial[0][i] + partial[1][i] + ... in split order; i < total (= ncols x n_out).
__global__ void mmq2_reduce_kernel(const float* __restrict__ partial, int splits, int64_t total,
                                   float* __restrict__ y) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    float v = partial[i];
    for (int s = 1; s < splits; ++s) v = __fadd_rn(v, partial[int64_t(s) * total + i]);
    y[i] = v;
  }
}

template <class T, int NT, bool HALF>
void allow_smem() {
  constexpr int kSmem = hd::mmq2_smem_bytes<T>(NT);
  POLYKV_CUDA_CHECK(
      cudaFuncSetAttribute(mmq2_kernel<T, NT, HALF>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
}

template <class T, bool HALF>
void allow_smem_all() {
  allow_smem<T, 1, HALF>();
  allow_smem<T, 2, HALF>();
  allow_smem<T, 4, HALF>();
  allow_smem<T, 8, HALF>();
}

// Once per type (before the first launch, outside any graph capture: the backend's first run of a
// step is eager): every instance may take its shared memory, and the CTAs per SM of the widest
// instance (8 n tiles), which the split plan uses for every column count so that it does not depend
// on n (batch invariance).
template <class T>
int prepare_type() {
  static int per_sm = 0;
  if (per_sm == 0) {
    allow_smem_all<T, kHalf<T>>();
    constexpr int kSmem = hd::mmq2_smem_bytes<T>(8);
    int n = 0;
    POLYKV_CUDA_CHECK(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, mmq2_kernel<T, 8, kHalf<T>>, kThreads, kSmem));
    check(n >= 1, "CUDA mmq: a kernel of ", T::kBlockBytes, "-byte blocks does not fit an SM");
    per_sm = n;
  }
  return per_sm;
}

template <class T, int NT>
void launch_nt(const dim3 grid, const Mmq2Args& a, cudaStream_t s) {
  constexpr int kSmem = hd::mmq2_smem_bytes<T>(NT);
  mmq2_kernel<T, NT, kHalf<T>><<<grid, kThreads, kSmem, s>>>(a);
  POLYKV_CUDA_LAUNCHED();
}

template <class T>
void launch_type(const WeightMatrix& w, const __half* x16, float* y, int n, CudaContext& ctx, int forced_splits) {
  const hd::SplitGeom geom = hd::split_geom<T>(w.n_in);
  const hd::MmqPlan plan = hd::mmq2_plan(w.n_out, geom.n_units, ctx.sm_count(), prepare_type<T>(), forced_splits);
  const cudaStream_t s = ctx.stream();
  for (int c0 = 0; c0 < n; c0 += hd::kMmqMaxCols) {
    const int ncols = std::min(hd::kMmqMaxCols, n - c0);
    const int64_t total = int64_t(ncols) * w.n_out;
    float* yc = y + int64_t(c0) * w.n_out;
    Mmq2Args a{};
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
      case 1: launch_nt<T, 1>(grid, a, s); break;
      case 2: launch_nt<T, 2>(grid, a, s); break;
      case 4: launch_nt<T, 4>(grid, a, s); break;
      default: launch_nt<T, 8>(grid, a, s); break;
    }
    if (plan.splits > 1) mmq2_reduce_splits(a.out, plan.splits, total, yc, s);
  }
}

}  // namespace

void mmq2_reduce_splits(const float* partial, int splits, int64_t total, float* y, cudaStream_t s) {
  const unsigned blocks = unsigned(std::clamp<int64_t>((total + 255) / 256, 1, 65535));
  mmq2_reduce_kernel<<<blocks, 256, 0, s>>>(partial, splits, total, y);
  POLYKV_CUDA_LAUNCHED();
}

void mmq2_launch(const WeightMatrix& w, const __half* x16, float* y, int n, CudaContext& ctx, int forced_splits) {
  const bool done = hd::visit_split_decoder(w.type, [&](auto dec) {
    using T = decltype(dec);
    if constexpr (hd::mmq_type<T>()) launch_type<T>(w, x16, y, n, ctx, forced_splits);
  });
  check(done, "CUDA mmq: no kernel for ", dtype_name(w.type));
}

}  // namespace polykv::cuda
