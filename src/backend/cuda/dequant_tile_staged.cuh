// The prefill tiles' staged dequantization (device code), shared by the split layout's kernel
// (matmul_cuda_split.cu) and the ggml rows' (matmul_cuda_prefill.cu).
//
// A tile is rows of f16 values, [rows][n_in], back to back. Its units (a thread's share of a block: V =
// kBlockValues / kParts values, kRuns runs of 16) are numbered t = row * units_per_row + unit; kStageThreads
// consecutive units starting at a multiple of kStageThreads (a multiple of kParts) are whole blocks, so they are
// the kStageThreads x V consecutive values of the tile from t0 * V on. Each thread decodes one unit into shared
// memory at its place in its block, then the block writes the values out as contiguous 16-byte vectors: one
// thread writing its own runs to the tile (32-byte pieces 64 bytes apart, or for the k-quants interleaved with 7
// other lanes') wrote q4_K tiles at 670 GB/s and q4_0 at 1600 on an H100; staged, ~2550 (copy: 3000;
// 2026-12-06, docs/CUDA_MMQ.md "Prefill tiles").
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "backend/cuda/matmul_cuda_dot.cuh"

namespace polykv::cuda::hd {

constexpr int kStageThreads = 256;

// 16 values as f16 (round to nearest even) at dst, 16-byte aligned: two 16-byte stores.
__device__ inline void store_run16_f16(__half* dst, const float (&v)[16]) {
  uint4 packed[2];
  __half2* h = reinterpret_cast<__half2*>(packed);
#pragma unroll
  for (int k = 0; k < 8; ++k) h[k] = __floats2half2_rn(v[2 * k], v[2 * k + 1]);
  uint4* o = reinterpret_cast<uint4*>(dst);
  o[0] = packed[0];
  o[1] = packed[1];
}

// The tile's units [0, total_units) into dst (16-byte aligned), by a grid-stride loop of kStageThreads-thread
// blocks. unit_at(i, u, part, unit) decodes unit u (part = u % kParts) of the tile's row i.
template <class T, class UnitAt>
__device__ void dequantize_tile_staged(int64_t total_units, int64_t units_per_row, __half* __restrict__ dst,
                                       UnitAt&& unit_at) {
  constexpr int V = T::kBlockValues / T::kParts;  // values per unit
  static_assert(V == 16 * T::kRuns && kStageThreads % T::kParts == 0, "units tile the row");
  __shared__ alignas(16) __half stage[kStageThreads * V];  // [kStageThreads / kParts blocks][kBlockValues]
  const int tid = int(threadIdx.x);
  for (int64_t t0 = int64_t(blockIdx.x) * kStageThreads; t0 < total_units; t0 += int64_t(gridDim.x) * kStageThreads) {
    const int64_t t = t0 + tid;
    if (t < total_units) {
      const int64_t i = t / units_per_row, u = t % units_per_row;
      const int part = int(u % T::kParts);  // = tid % kParts: t0 and units_per_row are multiples of kParts
      typename T::Unit unit;
      unit_at(i, u, part, unit);
      __half* out = stage + (tid / T::kParts) * T::kBlockValues;
#pragma unroll
      for (int r = 0; r < T::kRuns; ++r) {
        float v[16];
        unit_run_values(unit, r, 1.0f, v);
        store_run16_f16(out + T::run_pos(part, r), v);
      }
    }
    __syncthreads();
    const int64_t units = total_units - t0 < kStageThreads ? total_units - t0 : kStageThreads;
    const int vecs = int(units * V / 8);  // 16-byte vectors of 8 halves
    const uint4* from = reinterpret_cast<const uint4*>(stage);
    uint4* to = reinterpret_cast<uint4*>(dst + t0 * V);
    for (int k = tid; k < vecs; k += kStageThreads) to[k] = from[k];
    __syncthreads();  // the stage is rewritten next
  }
}

}  // namespace polykv::cuda::hd
