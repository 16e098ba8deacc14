// mmq v2: the quantized mat-mul on tensor cores fed from a cp.async ring in shared memory
// (matmul_cuda_mmq_stage.cuh has the staged layout, docs/CUDA_MMQ.md the counts that motivate it).
//
// What changes against v1 (matmul_cuda_mmq.cu), per chunk of 4 units (128 values) of a row:
//  - v1 loads every B fragment from global memory (L1/L2) inside the k-step loop, right before its mma:
//    8 dependent 8-byte loads per k-step and warp, one chunk of weights prefetched in registers, 2 CTAs
//    of 4 warps per SM: latency-bound (~64 TFLOP/s measured at 64 columns).
//  - v2: a CTA of 8 warps owns 256 rows and all the launch's columns; 3 or 4 chunks of weights
//    (the row's unit bytes and heads) and of x (f16, all columns, reordered into fragment order) are
//    copied by cp.async 2 or 3 chunks ahead of the compute (hd::mmq2_stages); a warp reads its units and its B
//    fragments from shared memory (one 16-byte load per n tile gives two k-steps). x is read from L2
//    once per 256 rows (v1: per 128 rows).
// The values and the mma sequence of a row are v1's (the same units, words, f16 roundings, chunk order);
// only the K split (hd::mmq2_plan) differs, so v2's bits equal v1's when both run one split.
#include <cuda_fp16.h>

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/matmul_cuda_mmq2.h"
#include "backend/cuda/matmul_cuda_mmq_stage.cuh"
#include "core/error.h"

namespace polykv::cuda {
namespace {

// Threads of a CTA with MT m16 tiles per warp: 256 rows = (8 warps x 2 tiles) or (16 warps x 1 tile).
template <int MT>
__host__ __device__ constexpr int threads_for() { return hd::kMmq2Rows / (16 * MT) * 32; }
static_assert(threads_for<2>() == hd::kMmq2Rows && threads_for<1>() == 2 * hd::kMmq2Rows, "256 rows per CTA");

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

__device__ __forceinline__ uint32_t smem_addr(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }

// cp.async of BYTES (4, 8 or 16) bytes; !valid: BYTES zeros, nothing read.
template <int BYTES>
__device__ __forceinline__ void cp_async(void* dst, const void* src, bool valid) {
  const int n = valid ? BYTES : 0;
  if constexpr (BYTES == 16) {
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;" ::"r"(smem_addr(dst)), "l"(src), "r"(n)
                 : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;" ::"r"(smem_addr(dst)), "l"(src), "n"(BYTES), "r"(n)
                 : "memory");
  }
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

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

// Issues the copies of chunk c into stage `st`. Region A: piece i = k kThreads + tid (k < kPiecesA) is
// piece i % kPiecesA of CTA row i / kPiecesA, so consecutive lanes read consecutive 16 bytes of a row
// (whole sectors); region B: thread tid copies CTA row tid's other pieces. A row past n_out reads the
// last row (its results are not stored). Then the thread's share of the 8 NT x 16 activation slots.
template <class T, int NT, int kThreads>
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
    if (kThreads > hd::kMmq2Rows && tid >= hd::kMmq2Rows) continue;  // 16 warps: threads 0..255 copy region B
    const hd::MmqPiece p = G::piece(a.geom, c, k);
    uint8_t* dst = sb + tid * G::kPitchB + p.dst;
    const uint8_t* src = p.valid ? row + p.src : row;
    if (p.bytes == 16)
      cp_async<16>(dst, src, p.valid);
    else if (p.bytes == 8)
      cp_async<8>(dst, src, p.valid);
    else
      cp_async<4>(dst, src, p.valid);
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
// only): A fragments by f16 arithmetic (hd::mmq_half_pair, the same f16 values).
template <class T, int NT, bool HALF, int MT>
__global__ void __launch_bounds__(threads_for<MT>(), 1) mmq2_kernel(const Mmq2Args a) {
  static_assert(!HALF || hd::mmq_half_dequant<T>(), "f16 dequantization for q4_0 / q8_0 only");
  using S = hd::Split<T>;
  using G = hd::MmqStage<T>;
  constexpr int kMT = MT, kNR = 2 * MT;  // m16 tiles per warp, rows per thread
  constexpr int kThreads = threads_for<MT>();
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
    if (s < n_my) stage_chunk<T, NT, kThreads>(a, smem + s * kStageBytes, row_base, c_begin + s, tid);
    cp_async_commit();
  }

  float acc[kMT][NT][4] = {};
  for (int64_t i = 0; i < n_my; ++i) {
    // Chunk i has landed (for this thread; the barrier makes every thread's copies visible, and
    // every warp has finished with chunk i - 1, whose stage is refilled next).
    cp_async_wait<kStages - 2>();
    __syncthreads();
    {
      const int64_t nxt = i + kStages - 1;
      if (nxt < n_my)
        stage_chunk<T, NT, kThreads>(a, smem + int(nxt % kStages) * kStageBytes, row_base, c_begin + nxt, tid);
      cp_async_commit();
    }
    const int64_t c = c_begin + i;
    const uint8_t* st = smem + int(i % kStages) * kStageBytes;
    const uint8_t* sa = st;
    const uint8_t* sb = st + hd::kMmq2Rows * G::kPitchA;
    const uint8_t* sx = sb + hd::kMmq2Rows * G::kPitchB;
    const int64_t u = hd::kMmqUnitsPerChunk * c + t;  // this thread's unit
    const bool has = u < a.geom.n_units;
    const int part = int(u % T::kParts);
    typename T::Unit wu[kNR];
    uint32_t d2[kNR];  // HALF: the unit's f16 d twice (0 for a unit past the row's end)
#pragma unroll
    for (int r = 0; r < kNR; ++r) {
      const int lr = warp * 16 * kMT + 8 * r + g;  // row 8 r + g of the warp: m tile r / 2, upper half r % 2
      uint32_t q[S::kUnitWords], h[S::kHeadWords];
      hd::mmq_stage_unit<T>(sa + lr * G::kPitchA, sb + lr * G::kPitchB, c, t, q, h);
      S::decode(q, h, part, wu[r]);
      d2[r] = has ? (h[0] & 0xFFFFu) * 0x10001u : 0u;
    }
#pragma unroll
    for (int jp = 0; jp < hd::kMmqStepsPerChunk / 2; ++jp) {
      // A fragments of k-steps 2 jp and 2 jp + 1 (16 registers), then per n tile one 16-byte load of
      // both steps' B fragments and 2 x kMT mma's.
      uint32_t af[2][kMT][4];
#pragma unroll
      for (int jj = 0; jj < 2; ++jj) {
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          if constexpr (HALF) {
            const int j = 2 * jp + jj;
            const uint32_t blo = hd::mmq_half_bytes<T>(wu[2 * mt], j), bhi = hd::mmq_half_bytes<T>(wu[2 * mt + 1], j);
            af[jj][mt][0] = hd::mmq_half_pair<T>(blo, 0, d2[2 * mt]);
            af[jj][mt][1] = hd::mmq_half_pair<T>(bhi, 0, d2[2 * mt + 1]);
            af[jj][mt][2] = hd::mmq_half_pair<T>(blo, 1, d2[2 * mt]);
            af[jj][mt][3] = hd::mmq_half_pair<T>(bhi, 1, d2[2 * mt + 1]);
          } else {
            float lo[4], hi[4];
            hd::unit_word_values(wu[2 * mt], 2 * jp + jj, lo);
            hd::unit_word_values(wu[2 * mt + 1], 2 * jp + jj, hi);
            af[jj][mt][0] = has ? pack_half2(lo[0], lo[1]) : 0u;
            af[jj][mt][1] = has ? pack_half2(hi[0], hi[1]) : 0u;
            af[jj][mt][2] = has ? pack_half2(lo[2], lo[3]) : 0u;
            af[jj][mt][3] = has ? pack_half2(hi[2], hi[3]) : 0u;
          }
        }
      }
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        uint32_t b[4];
        hd::st_ld16(sx + (8 * nt + g) * hd::kMmq2XPitch + 16 * (4 * jp + t), b);
#pragma unroll
        for (int jj = 0; jj < 2; ++jj) {
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt) mma_16816(acc[mt][nt], af[jj][mt], b[2 * jj], b[2 * jj + 1]);
        }
      }
    }
  }
  cp_async_wait<0>();

  const int64_t wrow = row_base + 16 * kMT * warp;
  float* out = a.out + int64_t(blockIdx.y) * a.ncols * a.n_out;
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int64_t row = wrow + 16 * mt + g + 8 * (k / 2);
        const int col = 8 * nt + 2 * t + k % 2;
        if (row < a.n_out && col < a.ncols) out[int64_t(col) * a.n_out + row] = acc[mt][nt][k];
      }
    }
  }
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

template <class T, int NT, bool HALF, int MT>
void allow_smem() {
  constexpr int kSmem = hd::mmq2_smem_bytes<T>(NT);
  POLYKV_CUDA_CHECK(
      cudaFuncSetAttribute(mmq2_kernel<T, NT, HALF, MT>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
}

template <class T, bool HALF, int MT>
void allow_smem_all() {
  allow_smem<T, 1, HALF, MT>();
  allow_smem<T, 2, HALF, MT>();
  allow_smem<T, 4, HALF, MT>();
  allow_smem<T, 8, HALF, MT>();
}

// Once per type (before the first launch, outside any graph capture: the backend's first run of a
// step is eager): every instance may take its shared memory, and the CTAs per SM of the widest
// instance (8 n tiles), which the split plan uses for every column count so that it does not depend
// on n (batch invariance).
template <class T, int MT>
int prepare_type() {
  static int per_sm = 0;
  if (per_sm == 0) {
    allow_smem_all<T, false, MT>();
    if constexpr (hd::mmq_half_dequant<T>()) allow_smem_all<T, true, MT>();
    constexpr int kSmem = hd::mmq2_smem_bytes<T>(8);
    int n = 0;
    POLYKV_CUDA_CHECK(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, mmq2_kernel<T, 8, false, MT>, threads_for<MT>(), kSmem));
    check(n >= 1, "CUDA mmq v2: a kernel of ", T::kBlockBytes, "-byte blocks does not fit an SM");
    per_sm = n;
  }
  return per_sm;
}

template <class T, int NT, bool HALF, int MT>
void launch_nt(const dim3 grid, const Mmq2Args& a, cudaStream_t s) {
  constexpr int kSmem = hd::mmq2_smem_bytes<T>(NT);
  mmq2_kernel<T, NT, HALF, MT><<<grid, threads_for<MT>(), kSmem, s>>>(a);
  POLYKV_CUDA_LAUNCHED();
}

template <class T, bool HALF, int MT>
void launch_type(const WeightMatrix& w, const __half* x16, float* y, int n, CudaContext& ctx, int forced_splits) {
  const hd::SplitGeom geom = hd::split_geom<T>(w.n_in);
  const hd::MmqPlan plan = hd::mmq2_plan(w.n_out, geom.n_units, ctx.sm_count(), prepare_type<T, MT>(), forced_splits);
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
      case 1: launch_nt<T, 1, HALF, MT>(grid, a, s); break;
      case 2: launch_nt<T, 2, HALF, MT>(grid, a, s); break;
      case 4: launch_nt<T, 4, HALF, MT>(grid, a, s); break;
      default: launch_nt<T, 8, HALF, MT>(grid, a, s); break;
    }
    if (plan.splits > 1) {
      const unsigned blocks = unsigned(std::clamp<int64_t>((total + 255) / 256, 1, 65535));
      mmq2_reduce_kernel<<<blocks, 256, 0, s>>>(a.out, plan.splits, total, yc);
      POLYKV_CUDA_LAUNCHED();
    }
  }
}

}  // namespace

void mmq2_launch(const WeightMatrix& w, const __half* x16, float* y, int n, CudaContext& ctx, int forced_splits,
                 bool half_dequant, bool sixteen_warps) {
  const bool done = hd::visit_split_decoder(w.type, [&](auto dec) {
    using T = decltype(dec);
    if constexpr (hd::mmq_type<T>()) {
      if (sixteen_warps) {
        if constexpr (hd::mmq_half_dequant<T>()) {
          launch_type<T, true, 1>(w, x16, y, n, ctx, forced_splits);
          return;
        }
        launch_type<T, false, 1>(w, x16, y, n, ctx, forced_splits);
        return;
      }
      if constexpr (hd::mmq_half_dequant<T>()) {
        if (half_dequant) {
          launch_type<T, true, 2>(w, x16, y, n, ctx, forced_splits);
          return;
        }
      }
      launch_type<T, false, 2>(w, x16, y, n, ctx, forced_splits);
    }
  });
  check(done, "CUDA mmq v2: no kernel for ", dtype_name(w.type));
}

}  // namespace polykv::cuda
