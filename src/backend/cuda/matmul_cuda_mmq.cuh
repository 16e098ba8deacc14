// The fragments of the quantized mat-muls on tensor cores (the dense kernel matmul_cuda_mmq2.cu with its
// staging in matmul_cuda_mmq_stage.cuh, and the MoE experts' moe_cuda_v2.cu), host and device code
// (matmul_cuda_hd.cuh), tested on the CPU by tests/cuda_mmq_test.cpp. The PTX wrappers and the fragment
// builders are in mma_fragments.cuh.
//
// The kernels multiply weights in the split layout (matmul_cuda_split.cuh: q4_0, q8_0, q4_K, q6_K) by
// columns of activations with mma.sync m16n8k16 (f16 x f16 -> f32), dequantizing in registers.
//
// Fragments. A warp owns 32 rows (two m16 tiles) and all the call's columns (NT n8 tiles). The K
// dimension is walked in chunks of 4 units (the split layout's units: 32 values each, kRuns = 2 runs of
// 16); in a chunk, the thread with threadID_in_group t (lane % 4) takes unit 4 c + t of each of its rows
// (rows g, g + 8, g + 16, g + 24 of the warp, g = lane / 4). An mma's 16 k slots may stand for any 16
// values as long as A and B agree: in k-step j (0..7) of a chunk, slots 2t, 2t+1, 2t+8, 2t+9 hold values
// 4 (j % 4) .. + 3 of run j / 4 of thread t's unit, i.e. word j of the decoded hd::QUnit
// (mmq_value_pos). So a thread's A registers come from its own unit, and its B registers (columns g of
// each n tile) are the 4 consecutive f16 activations at mmq_value_pos(.., j, 0).
//
// Values. A weight is unit_value's f32 value (scale * q + min, exact) rounded to f16: the same f16
// weights as the cuBLAS path's dequantized tiles (matmul_cuda_prefill.cu). x is rounded to f16
// (__float2half_rn). Products are exact in the tensor core, sums in f32.
//
// Batch invariance: y[c][o] is the sum over the K splits (a count set by the matrix shape and the
// device, never by the column count), in split order, of the chain of mma's over the split's chunks
// in increasing order, each seeing row o's and column c's values only. So a column's bits do not
// depend on the other columns nor on how many there are (wider calls run in chunks of kMmqMaxCols
// columns). They differ from the mat-vec path's (8-bit activations, n <= 8).
#pragma once
#include <cstdint>

#include "backend/cuda/matmul_cuda_dot.cuh"
#include "backend/cuda/matmul_cuda_split.cuh"

namespace polykv::cuda::hd {

constexpr int kMmqUnitsPerChunk = 4;           // one unit per threadID_in_group
constexpr int kMmqStepsPerChunk = 8;           // k16 steps per chunk (8 words of a unit)
constexpr int kMmqMaxCols = 64;                // columns per launch (8 n tiles)

// Types the kernel takes: split types whose units are 2 runs of 16 values.
template <class T>
POLYKV_HDC constexpr bool mmq_type() { return T::kRuns == 2; }

// Row position of byte e (0..3) of word j (0..7) of unit (blk, part) of type T.
template <class T>
POLYKV_HD int64_t mmq_value_pos(int64_t blk, int part, int j, int e) {
  return blk * T::kBlockValues + T::run_pos(part, j / 4) + 4 * (j % 4) + e;
}

// The 4 values of word w of a decoded unit: unit_value(u, w, e) for e = 0..3, exactly. On the device
// the signed byte becomes a float without the quarter-rate I2F: 2^23 + (q + 128) is built with one
// byte permute and 128 + 2^23 subtracted (exact).
template <class U>
POLYKV_HD void unit_word_values(const U& u, int w, float (&v)[4]) {
  const int g = w / (U::kWords / U::kGroupCount);
#ifdef __CUDA_ARCH__
  const uint32_t biased = u.q[w] ^ 0x80808080u;  // byte q + 128, unsigned
#endif
#pragma unroll
  for (int e = 0; e < 4; ++e) {
#ifdef __CUDA_ARCH__
    const float qf = fadd(__uint_as_float(__byte_perm(biased, 0x4B000000u, 0x7650u + unsigned(e))), -8388736.0f);
#else
    const float qf = float(byte_s8(u.q[w], e));
#endif
    v[e] = fma(u.scale[g], qf, u.min[g]);
  }
}

// How a call is cut (hd::mmq2_plan): row blocks (grid x) times `splits` ranges of chunks along K (grid
// y), each of chunks_per_split chunks (the last may be shorter, none is empty). Depends on the matrix
// and the device only (batch invariance).
struct MmqPlan {
  int64_t row_blocks = 0;
  int64_t n_chunks = 0;          // chunks of kMmqUnitsPerChunk units per row (the last may be partial)
  int64_t chunks_per_split = 0;
  int splits = 0;
};

// n tiles (of 8 columns) of a launch of ncols (1..kMmqMaxCols) columns: 1, 2, 4 or 8.
POLYKV_HDC constexpr int mmq_tiles(int ncols) { return ncols <= 8 ? 1 : ncols <= 16 ? 2 : ncols <= 32 ? 4 : 8; }

}  // namespace polykv::cuda::hd
