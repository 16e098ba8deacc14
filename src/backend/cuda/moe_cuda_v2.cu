// The v2 expert kernels (moe_cuda.h: POLYKV_CUDA_MOE_KERNEL=v2): experts repacked at upload into the
// split layout (matmul_cuda_split.cuh) and read with 16-byte streaming loads.
//
// Mat-vec (decode, few tokens per expert): grid (warps of R = 4 rows over every part's rows / 8 warps
// per block, work items). A warp computes R rows of its item's expert for the item's columns (up to
// NC = 8 gathered token rows); lane l takes units l, l + 32, ... and issues U x R unit loads before
// using any (8 x 16 bytes per lane for 1-2 columns). Qwen3-30b-a3b decode (2048 x 768 experts, top 8,
// q4_0): gate+up 8 x 2 x 192 = 3072 warps, down 8 x 512 = 4096 warps: every SM busy. Bytes per token
// and layer = 8 experts x 3 x 768 x 2048 x 18 / 32 = 21.2 MB (5.0 us at 4.2 TB/s).
// Arithmetic: moe_cuda_v2.cuh (the v1 kernels' bits).
//
// Mat-mul on tensor cores (many tokens per expert, moe_uses_mma): items of up to 64 columns; a thread
// block of 4 warps computes 128 rows of one part of the item's expert: mma.sync m16n8k16, f16 x f16 ->
// f32, with the dense mmq kernel's fragments (matmul_cuda_mmq.cuh: the layout; mma_fragments.cuh: the builders), with
// the columns gathered (column c = activation row perm[first + c] / col_div, f16) and the n8 tiles
// chosen per item (1, 2, 4 or 8 by its column count); the whole K range in one block (no K split: the
// items fill the GPU). Each expert's bytes are read once per 64 of its tokens.
#include <cuda_fp16.h>

#include <algorithm>

#include "backend/cuda/matmul_cuda_mmq.cuh"
#include "backend/cuda/mma_fragments.cuh"
#include "backend/cuda/moe_cuda_internal.h"
#include "backend/cuda/moe_cuda_v2.cuh"
#include "core/error.h"

namespace polykv::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;

template <int NC>
__host__ __device__ constexpr int min_blocks() { return NC == 1 ? 3 : 2; }

// groups_per_part: warps of R rows per part.
template <class T, int NC>
__global__ void __launch_bounds__(kThreads, min_blocks<NC>()) moe_split_matvec_kernel(const MoeMatArgs a,
                                                                                        hd::SplitGeom geom,
                                                                                        int64_t groups_per_part) {
  using Cfg = hd::MoeSplitCfg<T, NC>;
  constexpr int R = Cfg::kR, U = Cfg::kU;
  hd::MoeItem it;
  if (a.direct_ids) {
    const int e = a.direct_ids[blockIdx.y];
    if (e < 0 || e >= a.n_expert) return;
    it = {e, int(blockIdx.y), 1, 0};
  } else {
    if (int(blockIdx.y) >= *a.n_items) return;
    it = a.items[blockIdx.y];
  }
  const int64_t gw = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (gw >= groups_per_part * a.n_parts) return;  // the whole warp
  const int part = gw >= groups_per_part ? 1 : 0;
  const int64_t row0 = (gw - part * groups_per_part) * R;
  const int nrows = int(a.n_out - row0 < R ? a.n_out - row0 : R);
  const uint8_t* w = (part ? a.base[1] : a.base[0]) + size_t(it.expert) * a.expert_stride;
  const uint8_t* rows[R];
#pragma unroll
  for (int r = 0; r < R; ++r) rows[r] = w + size_t(row0 + min(r, nrows - 1)) * a.row_stride;
  int32_t slot[NC];
  int64_t arow[NC];
#pragma unroll
  for (int c = 0; c < NC; ++c) {
    slot[c] = a.direct_ids ? it.first : a.perm[it.first + min(c, it.count - 1)];  // past count: the last
    arow[c] = slot[c] / a.col_div;
  }
  const int lane = int(threadIdx.x % 32);
  const int64_t n_units = geom.n_units, n_steps = (n_units + 31) / 32;
  float acc[R][NC] = {};
  for (int64_t j0 = 0; j0 < n_steps; j0 += U)
    hd::moe_split_chunk<T, NC, R, U>(rows, geom, j0, lane, nrows, a.xq, a.xs, a.n_in, arow, acc);
  // Every lane holds every (r, c) sum after moe_warp_sum; lane r * NC + c (< 32) stores it.
  const float* bias = part ? a.bias[1] : a.bias[0];
  float* y = part ? a.y[1] : a.y[0];
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int c = 0; c < NC; ++c) {
      float v = moe_warp_sum(acc[r][c]);
      if (lane == (r * NC + c) % 32 && c < it.count && r < nrows) {
        if (bias) v = hd::fadd(v, bias[int64_t(it.expert) * a.n_out + row0 + r]);
        y[int64_t(slot[c]) * a.n_out + row0 + r] = v;
      }
    }
  }
}

// ---- tensor cores ------------------------------------------------------------------------------

// One warp's 32 rows (two m16 tiles) of the item's expert times its columns (NT n8 tiles).
template <class T, int NT>
__device__ __forceinline__ void mma_item(const MoeMatArgs& a, const hd::SplitGeom& geom, const hd::MoeItem& it,
                                         int part, int64_t row_base) {
  using S = hd::Split<T>;
  constexpr int MT = 2, NR = 4;
  const int lane = int(threadIdx.x % 32);
  const int g = lane / 4, t = lane % 4;
  const uint8_t* w = (part ? a.base[1] : a.base[0]) + size_t(it.expert) * a.expert_stride;
  const uint8_t* rows[NR];
#pragma unroll
  for (int i = 0; i < NR; ++i) rows[i] = w + size_t(min(row_base + 8 * i + g, a.n_out - 1)) * a.row_stride;
  const __half* x16 = static_cast<const __half*>(a.x16);
  const __half* xcol[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
    xcol[nt] = x16 + int64_t(a.perm[it.first + min(8 * nt + g, it.count - 1)] / a.col_div) * a.n_in;
  const int64_t n_chunks = (geom.n_units + hd::kMmqUnitsPerChunk - 1) / hd::kMmqUnitsPerChunk;
  float acc[MT][NT][4] = {};
  hd::RowUnits<T, NR> cur;
  hd::load_row_units<T, NR>(rows, geom, t, cur);
  for (int64_t c = 0; c < n_chunks; ++c) {
    const int64_t u = hd::kMmqUnitsPerChunk * c + t;
    const bool has = u < geom.n_units;
    const int64_t blk = u / T::kParts;
    const int part_u = int(u % T::kParts);
    typename T::Unit wu[NR];
#pragma unroll
    for (int i = 0; i < NR; ++i) S::decode(cur.q[i], cur.h[i], part_u, wu[i]);
    if (c + 1 < n_chunks) hd::load_row_units<T, NR>(rows, geom, u + hd::kMmqUnitsPerChunk, cur);  // next chunk in flight
#pragma unroll
    for (int j = 0; j < hd::kMmqStepsPerChunk; ++j) {
      const int64_t pos = hd::mmq_value_pos<T>(blk, part_u, j, 0);
      uint32_t b[NT][2];
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) mma::mmq_b_global(xcol[nt], pos, has, b[nt]);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        uint32_t af[4];
        hd::mmq_a_fragment(wu[2 * mt], wu[2 * mt + 1], j, has, af);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) mma::m16n8k16(acc[mt][nt], af, b[nt][0], b[nt][1]);
      }
    }
  }
  const float* bias = part ? a.bias[1] : a.bias[0];
  float* y = part ? a.y[1] : a.y[0];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int64_t row = row_base + 16 * mt + g + 8 * (k / 2);
        const int col = 8 * nt + 2 * t + k % 2;
        if (row < a.n_out && col < it.count) {
          float v = acc[mt][nt][k];
          if (bias) v = hd::fadd(v, bias[int64_t(it.expert) * a.n_out + row]);
          y[int64_t(a.perm[it.first + col]) * a.n_out + row] = v;
        }
      }
    }
  }
}

// grid (row blocks x parts, items), kMoeMmaWarps warps.
template <class T>
__global__ void __launch_bounds__(32 * hd::kMoeMmaWarps) moe_split_mma_kernel(const MoeMatArgs a, hd::SplitGeom geom,
                                                                             int64_t row_blocks) {
  if (int(blockIdx.y) >= *a.n_items) return;
  const hd::MoeItem it = a.items[blockIdx.y];
  const int part = int64_t(blockIdx.x) >= row_blocks ? 1 : 0;
  const int64_t rb = int64_t(blockIdx.x) - part * row_blocks;
  const int64_t row_base = rb * hd::kMoeMmaRowsPerBlock + int64_t(threadIdx.x / 32) * 32;
  if (row_base >= a.n_out) return;  // the whole warp
  switch (hd::mmq_tiles(it.count)) {
    case 1: mma_item<T, 1>(a, geom, it, part, row_base); break;
    case 2: mma_item<T, 2>(a, geom, it, part, row_base); break;
    case 4: mma_item<T, 4>(a, geom, it, part, row_base); break;
    default: mma_item<T, 8>(a, geom, it, part, row_base); break;
  }
}

__global__ void moe_act_f16_kernel(const float* __restrict__ g, const float* __restrict__ u, int64_t total,
                                   bool clamped, float alpha, float limit, __half* __restrict__ h) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
    h[i] = __float2half_rn(hd::moe_act(g[i], u[i], clamped, alpha, limit));
}

void fill_geometry(const ExpertStack& st, MoeMatArgs& a) {
  check(st.layout == WeightLayout::CudaSplit, "CUDA moe_experts v2: the experts are not in the split layout");
  a.expert_stride = st.expert_stride;
  a.row_stride = st.row_stride;
  a.n_out = st.n_out;
  a.n_in = st.n_in;
}

}  // namespace

void launch_moe_split_matvec(const ExpertStack& st, MoeMatArgs a, int64_t max_items, int width, cudaStream_t s) {
  fill_geometry(st, a);
  check(max_items <= 65535, "CUDA moe_experts: ", max_items, " work items (at most 65535 per launch)");
  const bool done = hd::visit_split_decoder(st.type, [&](auto dec) {
    using T = decltype(dec);
    const hd::SplitGeom geom = hd::split_geom<T>(st.n_in);
    auto go = [&](auto nc) {
      constexpr int NC = decltype(nc)::value;
      const int64_t gpp = hd::moe_split_groups(st.n_out, hd::MoeSplitCfg<T, NC>::kR);
      const dim3 grid(unsigned((gpp * a.n_parts + kWarps - 1) / kWarps), unsigned(max_items));
      moe_split_matvec_kernel<T, NC><<<grid, kThreads, 0, s>>>(a, geom, gpp);
    };
    if (width == 1) go(std::integral_constant<int, 1>{});
    else if (width == 2) go(std::integral_constant<int, 2>{});
    else if (width <= 4) go(std::integral_constant<int, 4>{});
    else go(std::integral_constant<int, 8>{});
  });
  check(done, "CUDA moe_experts v2: no split kernel for ", dtype_name(st.type), " experts");
  POLYKV_CUDA_LAUNCHED();
}

void launch_moe_split_mma(const ExpertStack& st, MoeMatArgs a, int64_t max_items, cudaStream_t s) {
  fill_geometry(st, a);
  check(max_items <= 65535, "CUDA moe_experts: ", max_items, " work items (at most 65535 per launch)");
  bool ok = false;
  const bool done = hd::visit_split_decoder(st.type, [&](auto dec) {
    using T = decltype(dec);
    if constexpr (hd::mmq_type<T>()) {
      const hd::SplitGeom geom = hd::split_geom<T>(st.n_in);
      const int64_t row_blocks = (st.n_out + hd::kMoeMmaRowsPerBlock - 1) / hd::kMoeMmaRowsPerBlock;
      const dim3 grid(unsigned(row_blocks * a.n_parts), unsigned(max_items));
      moe_split_mma_kernel<T><<<grid, 32 * hd::kMoeMmaWarps, 0, s>>>(a, geom, row_blocks);
      ok = true;
    }
  });
  check(done && ok, "CUDA moe_experts v2: no tensor-core kernel for ", dtype_name(st.type), " experts");
  POLYKV_CUDA_LAUNCHED();
}

void launch_moe_act_f16(const float* g, const float* u, int64_t total, bool clamped, float alpha, float limit,
                        void* h16, cudaStream_t s) {
  if (total <= 0) return;
  const unsigned blocks = unsigned(std::clamp<int64_t>((total + 255) / 256, 1, 65535));
  moe_act_f16_kernel<<<blocks, 256, 0, s>>>(g, u, total, clamped, alpha, limit, static_cast<__half*>(h16));
  POLYKV_CUDA_LAUNCHED();
}

}  // namespace polykv::cuda
