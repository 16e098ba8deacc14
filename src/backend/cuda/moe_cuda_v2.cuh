// Per-element arithmetic of the v2 expert kernels (moe_cuda_v2.cu), host and device
// (matmul_cuda_hd.cuh); tests/moe_cuda_v2_test.cpp runs it on the CPU, lane by lane, against the v1
// kernels' walk on the ggml rows (the same bits) and against matmul_ref.
//
// The v2 mat-vec reads experts in the split layout (matmul_cuda_split.cuh): lane l of a warp takes
// units l, l + 32, ... of R rows of one expert, each unit one 16-byte streaming load (q8_0: two;
// q6_K: 16 + 8 + 2 bytes), and multiplies it by NC gathered columns of 8-bit activations (column c
// = activation row arow[c]). A unit decodes to the same hd::QUnit as Dec::load on the ggml block
// (matmul_cuda_split.cuh), and the per-lane order (units in order, columns then rows inside a unit,
// unit_dot per group) and the final butterfly are the v1 kernels', so v2's mat-vec gives the v1
// kernels' bits (and cuda::matvec's on that expert's rows).
#pragma once
#include <cstdint>

#include "backend/cuda/matmul_cuda_dot.cuh"
#include "backend/cuda/matmul_cuda_split.cuh"

namespace polykv::cuda::hd {

// Rows per warp (R) and unit steps per chunk of loads (U) of the v2 mat-vec for decoder T and NC
// columns: 4 rows, 2 for 8 columns (fine enough that 8 experts x 768 rows give ~3000 warps: 132 SMs are full), up to
// 8 16-byte loads in flight per lane for 1-2 columns, 4 for more (registers for accumulators).
template <class T, int NC>
struct MoeSplitCfg {
  static constexpr int kR = NC >= 8 ? 2 : 4;  // 8 columns: 2 rows (4 spilled registers)
  static constexpr int kLoads = NC <= 2 ? 8 : 4;
  static constexpr int kU = kLoads / (kR * Split<T>::kLoadsPerUnit) > 0 ? kLoads / (kR * Split<T>::kLoadsPerUnit) : 1;
};

// Unit u (block blk = u / kParts, part = u % kParts) of R rows, loaded as split words q[r], h[r],
// times NC gathered columns: acc[r][c] += row r's unit . column c's activations (xq + arow[c] * n_in,
// xs + arow[c] * n_in / 32). Column-major order inside the unit as unit_step.
template <class T, int NC, int R>
POLYKV_HD void moe_split_unit(const uint32_t (&q)[R][Split<T>::kUnitWords], const uint32_t (&h)[R][Split<T>::kHeadWords],
                              int64_t u, const int8_t* xq, const ActScale* xs, int64_t n_in,
                              const int64_t (&arow)[NC], float (&acc)[R][NC]) {
  const int64_t blk = u / T::kParts;
  const int part = int(u % T::kParts);
  const int64_t n_blocks_x = n_in / kActBlock;
  typename T::Unit wu[R];
#pragma unroll
  for (int r = 0; r < R; ++r) Split<T>::decode(q[r], h[r], part, wu[r]);
#pragma unroll
  for (int c = 0; c < NC; ++c) {
    XUnit<T> xu;
    load_x<T>(xq + arow[c] * n_in, xs + arow[c] * n_blocks_x, blk, part, xu);
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r][c] = unit_dot<T>(wu[r], xu, acc[r][c]);
  }
}

// One chunk of the v2 mat-vec's loop (moe_split_matvec_kernel; moe_down_sum_kernel): the loads of units
// u = 32 (j0 + k) + lane, k < U, of the R rows first (rows r >= nrows and units past the row: zeros), then
// their dots in unit order.
template <class T, int NC, int R, int U>
POLYKV_HD void moe_split_chunk(const uint8_t* const (&rows)[R], const SplitGeom& geom, int64_t j0, int lane, int nrows,
                               const int8_t* xq, const ActScale* xs, int64_t n_in, const int64_t (&arow)[NC],
                               float (&acc)[R][NC]) {
  const int64_t n_units = geom.n_units;
  uint32_t q[U][R][Split<T>::kUnitWords], h[U][R][Split<T>::kHeadWords];
  split_load_chunk<T, R, U>(rows, geom, j0, lane, nrows, q, h);
#pragma unroll
  for (int k = 0; k < U; ++k) {
    const int64_t u = 32 * (j0 + k) + lane;
    if (u < n_units) moe_split_unit<T, NC, R>(q[k], h[k], u, xq, xs, n_in, arow, acc);
  }
}

// Rows of the mma path: a thread block of 4 warps covers 128 rows of one part of one expert.
constexpr int kMoeMmaWarps = 4;
constexpr int kMoeMmaRowsPerBlock = 128;

// Grid x of the v2 mat-vec: warps of R rows over every part's rows, kWarps warps per block.
POLYKV_HD int64_t moe_split_groups(int64_t n_out, int r) { return (n_out + r - 1) / r; }

}  // namespace polykv::cuda::hd
