// The arithmetic of the CUDA mat-vec kernels (host and device, see matmul_cuda_hd.cuh): activation
// quantization, the dot of one unit (matmul_cuda_decode.cuh) with the activations, and one lane's
// share of a warp's rows. The kernels in matmul_cuda.cu are these functions plus a warp reduction;
// tests/cuda_quant_decode_test.cpp runs them on the CPU (lane by lane, reduction emulated) against
// matmul_ref.
//
// Quantized weights multiply 8-bit activations with dp4a. Each column of x is quantized once per
// call in blocks of 32 values: d = max|x| / 127, q = round_half_even(x / d) (|q| <= 127), stored as
// qs [n][n_in] int8 and one ActScale per block. The error this adds is that of rounding x to d * q:
// |x - d q| <= d / 2 per value, so |Δy| <= Σ_i |w_i| amax_32(i) / 254 (rigorous; about 0.2-0.5 %
// relative on random data, like the CPU backend's own 8-bit activations). Everything after that is
// f32 with exact integer dot products (|Σ| < 2^22).
//
// Batch invariance: one (row, column) dot is a fixed sequence of operations: the lane walks its units
// in increasing order, each unit adds its groups in order (unit_dot), then the 32 lanes are summed by
// one fixed butterfly. Nothing depends on how many columns (NC) or rows (R) the kernel handles at once.
#pragma once
#include <cstdint>

#include "backend/cuda/matmul_cuda_decode.cuh"

namespace polykv::cuda::hd {

// One block of 32 quantized activations: d, and d times the sum of the quants over values 0..15,
// 16..31 and 0..31 (for the min / zero-point terms of the weights).
struct alignas(16) ActScale {
  float d, s_lo, s_hi, s_all;
};

constexpr int kActBlock = 32;

POLYKV_HD float act_inverse(float d) {
#ifdef __CUDA_ARCH__
  return d > 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
#else
  return d > 0.0f ? 1.0f / d : 0.0f;
#endif
}

// round_half_even(x * id).
POLYKV_HD int32_t act_quant(float x, float id) {
#ifdef __CUDA_ARCH__
  return __float2int_rn(fmul(x, id));
#else
  return int32_t(std::nearbyint(fmul(x, id)));
#endif
}

POLYKV_HD float act_d(float amax) {
#ifdef __CUDA_ARCH__
  return __fdiv_rn(amax, 127.0f);
#else
  return amax / 127.0f;
#endif
}

POLYKV_HD ActScale act_scale(float d, int32_t sum_lo, int32_t sum_hi) {
  return {d, fmul(d, float(sum_lo)), fmul(d, float(sum_hi)), fmul(d, float(sum_lo + sum_hi))};
}

// Host reference of the device's quantization of one block (the device computes the same values,
// one lane per value, with warp reductions of max and of integer sums: both exact).
inline void quantize_act_block(const float* x, int8_t* q, ActScale& s) {
  float amax = 0.0f;
  for (int i = 0; i < kActBlock; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  const float d = act_d(amax), id = act_inverse(d);
  int32_t sum[2] = {0, 0};
  for (int i = 0; i < kActBlock; ++i) {
    q[i] = int8_t(act_quant(x[i], id));
    sum[i / 16] += q[i];
  }
  s = act_scale(d, sum[0], sum[1]);
}

POLYKV_HD ActScale ld_act_scale(const ActScale* p) {
#ifdef __CUDA_ARCH__
  const float4 v = *reinterpret_cast<const float4*>(p);
  return {v.x, v.y, v.z, v.w};
#else
  return *p;
#endif
}

// The activations one unit multiplies, for one column: the runs' quants and, per group, d and the
// matching d * Σq.
template <class T>
struct XUnit {
  uint32_t x[4 * T::kRuns];
  float d[T::kGroups];
  float s[T::kGroups];
};

// xq: the column's quants [n_in]; xs: its scales [n_in / 32]; blk: block index in the row.
template <class T>
POLYKV_HD void load_x(const int8_t* xq, const ActScale* xs, int64_t blk, int part, XUnit<T>& xu) {
  constexpr int kRunsPerGroup = T::kRuns / T::kGroups;
  constexpr int kGroupValues = 16 * kRunsPerGroup;
  static_assert(kGroupValues == 16 || kGroupValues == 32, "groups lie in one activation block");
  const int64_t base = blk * T::kBlockValues;
#pragma unroll
  for (int r = 0; r < T::kRuns; ++r)
    ld_16B<16>(reinterpret_cast<const uint8_t*>(xq + base + T::run_pos(part, r)), xu.x + 4 * r);
#pragma unroll
  for (int g = 0; g < T::kGroups; ++g) {
    const int64_t pos = base + T::run_pos(part, g * kRunsPerGroup);
    const ActScale a = ld_act_scale(xs + pos / kActBlock);
    xu.d[g] = a.d;
    xu.s[g] = kGroupValues == 32 ? a.s_all : ((pos & 16) ? a.s_hi : a.s_lo);
  }
}

// acc + Σ over the unit's values of value * activation, group by group:
//   acc += scale_g * (d * Σ q * xq)  then  acc += min_g * (d * Σ xq).
template <class T>
POLYKV_HD float unit_dot(const typename T::Unit& w, const XUnit<T>& x, float acc) {
  constexpr int kRunsPerGroup = T::kRuns / T::kGroups;
#pragma unroll
  for (int g = 0; g < T::kGroups; ++g) {
    int32_t isum = 0;
#pragma unroll
    for (int i = 4 * kRunsPerGroup * g; i < 4 * kRunsPerGroup * (g + 1); ++i) isum = dp4a(w.q[i], x.x[i], isum);
    acc = fma(w.scale[g], fmul(x.d[g], i2f_exact(isum)), acc);
    if constexpr (T::kHasMin) acc = fma(w.min[g], x.s[g], acc);
  }
  return acc;
}

// Rows one warp computes at once for NC columns of a type whose units hold `words` words: each
// activation load serves R rows, and a lane has R units in flight. The 64-value units of q2_K / q3_K
// take 2 rows from 4 columns on (4 would spill registers). The result of a row does not depend on R.
template <int NC, int words>
POLYKV_HDC constexpr int rows_per_warp() { return (NC >= 4 && words > 8) ? 2 : 4; }
template <class T, int NC>
POLYKV_HDC constexpr int rows_per_warp_q() { return rows_per_warp<NC, 4 * T::kRuns>(); }
template <class F, int NC>
POLYKV_HDC constexpr int rows_per_warp_f() { return rows_per_warp<NC, F::kValues>(); }

// One unit (block blk, part) of R rows, decoded in wu[r], times NC columns of quantized activations
// (xq [*][n_in], xs [*][n_in / 32]; columns >= ncols repeat column ncols - 1), added into acc[r][c].
template <class T, int NC, int R>
POLYKV_HD void unit_step(const typename T::Unit (&wu)[R], const int8_t* xq, const ActScale* xs, int64_t n_in,
                         int ncols, int64_t blk, int part, float (&acc)[R][NC]) {
  const int64_t n_blocks_x = n_in / kActBlock;
#pragma unroll
  for (int c = 0; c < NC; ++c) {
    const int cc = c < ncols ? c : ncols - 1;
    XUnit<T> xu;
    load_x<T>(xq + int64_t(cc) * n_in, xs + int64_t(cc) * n_blocks_x, blk, part, xu);
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r][c] = unit_dot<T>(wu[r], xu, acc[r][c]);
  }
}

// The same step in two halves, for kernels that load a unit's activations before its weights have
// landed: load_x_cols, then dot_cols. Every acc[r][c] sees the same operations in the same order as
// in unit_step (only the loads move).
template <class T, int NC>
struct XCols {
  XUnit<T> c[NC];
};

template <class T, int NC>
POLYKV_HD void load_x_cols(const int8_t* xq, const ActScale* xs, int64_t n_in, int ncols, int64_t blk, int part,
                           XCols<T, NC>& x) {
  const int64_t n_blocks_x = n_in / kActBlock;
#pragma unroll
  for (int c = 0; c < NC; ++c) {
    const int cc = c < ncols ? c : ncols - 1;
    load_x<T>(xq + int64_t(cc) * n_in, xs + int64_t(cc) * n_blocks_x, blk, part, x.c[c]);
  }
}

template <class T, int NC, int R>
POLYKV_HD void dot_cols(const typename T::Unit (&wu)[R], const XCols<T, NC>& x, float (&acc)[R][NC]) {
#pragma unroll
  for (int c = 0; c < NC; ++c) {
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r][c] = unit_dot<T>(wu[r], x.c[c], acc[r][c]);
  }
}

// Whether the kernels load the activations before waiting for the weights (NC <= 2: the activation
// registers are few; wider calls load them column by column, after).
template <int NC>
POLYKV_HDC constexpr bool x_first() { return NC <= 2; }

// One lane's share of R rows (rows[r]: first byte of row r) times NC columns: the lane walks units
// lane, lane + 32, ... of the rows, adding into acc[r][c]. (The staged kernel of matmul_cuda.cu
// visits the same units in the same order, reading the bytes from a shared-memory copy.)
template <class T, int NC, int R, int A>
POLYKV_HD void lane_dot_q(const uint8_t* const (&rows)[R], const int8_t* xq, const ActScale* xs, int64_t n_in,
                          int ncols, int lane, float (&acc)[R][NC]) {
  const int64_t n_units = n_in / T::kBlockValues * T::kParts;
  for (int64_t u = lane; u < n_units; u += 32) {
    const int64_t blk = u / T::kParts;
    const int part = int(u % T::kParts);
    typename T::Unit wu[R];
#pragma unroll
    for (int r = 0; r < R; ++r) T::template load<A>(rows[r] + blk * T::kBlockBytes, part, wu[r]);
    unit_step<T, NC, R>(wu, xq, xs, n_in, ncols, blk, part, acc);
  }
}

// Staging of quantized rows through shared memory (the stream kernel, matmul_cuda_stream.cu: a
// lane's own narrow loads of its block from device memory would touch many cache lines per warp
// instruction where blocks are not 16-byte multiples; the asynchronous copies give the memory
// parallelism): iteration `it` of a warp covers units [32 K it, 32 K (it + 1)) of each of its rows,
// i.e. blocks [blk0, blk0 + nb), nb <= kBlocks; lane l computes units 32 K it + 32 k + l, k = 0..K-1,
// in that order: exactly the units lane_dot_q's lane l walks, in the same order, whatever K. The warp
// copies the 16-byte aligned chunks holding those bytes (from the row, which must start 16-byte
// aligned and have a 16-byte multiple stride, so the copy never leaves [row, row + stride)) to
// shared memory; block b is then at byte lead + (b - blk0) * kBlockBytes of the copy. kChunks bounds
// the chunk count of any iteration (one more than the blocks' bytes need: the lead).
template <class T, int K = 1>
struct Stage {
  static constexpr int kUnitsPerLane = K;
  static constexpr int kBlocks = 32 * K / T::kParts;
  static constexpr int kBytes = kBlocks * T::kBlockBytes;
  static constexpr int kChunks = (kBytes + 15) / 16 + 1;
  int64_t blk0;
  int nb, lead, chunks;
};

template <class T, int K = 1>
POLYKV_HD Stage<T, K> stage_plan(int64_t it, int64_t n_blocks) {
  Stage<T, K> s;
  s.blk0 = it * Stage<T, K>::kBlocks;
  const int64_t left = n_blocks - s.blk0;
  s.nb = int(left < Stage<T, K>::kBlocks ? left : Stage<T, K>::kBlocks);
  s.lead = int((s.blk0 * T::kBlockBytes) % 16);
  s.chunks = (s.lead + s.nb * T::kBlockBytes + 15) / 16;
  return s;
}

// First byte of the chunks iteration st copies from a row (16-byte aligned).
template <class T, int K>
POLYKV_HD const uint8_t* stage_source(const uint8_t* row, const Stage<T, K>& st) {
  return row + st.blk0 * T::kBlockBytes - st.lead;
}

// Size of the staging buffer of one row for one iteration, in 16-byte chunks.
template <class T, int K = 1>
POLYKV_HDC constexpr int stage_chunks() { return Stage<T, K>::kChunks; }

// The lane's k-th unit of iteration st: unit blk0 * kParts + 32 k + lane, if it exists (false if not).
template <class T, int K>
POLYKV_HD bool staged_unit(const Stage<T, K>& st, int lane, int k, int64_t& blk, int& part) {
  const int64_t u = st.blk0 * T::kParts + 32 * k + lane;
  if (u >= (st.blk0 + st.nb) * T::kParts) return false;
  blk = u / T::kParts;
  part = int(u % T::kParts);
  return true;
}

// The alignment the staged loads may assume: blocks keep their address mod 16 in the copy, so
// kMaxAlign; and the copy is whole 16-byte chunks around the blocks, so 2-byte aligned types read
// whole words (A = 1, matmul_cuda_hd.cuh).
template <class T>
POLYKV_HDC constexpr int staged_align() { return T::kMaxAlign == 2 ? 1 : T::kMaxAlign; }

// Unit (blk, part) of each of the R rows from their staged copies bufs[r].
template <class T, int R, int K>
POLYKV_HD void staged_decode(const uint8_t* const (&bufs)[R], const Stage<T, K>& st, int64_t blk, int part,
                             typename T::Unit (&wu)[R]) {
#pragma unroll
  for (int r = 0; r < R; ++r)
    T::template load<staged_align<T>()>(bufs[r] + st.lead + (blk - st.blk0) * T::kBlockBytes, part, wu[r]);
}

// The lane's units of iteration st decoded from the staged copies bufs[r] of the R rows, times the
// activations; the same operations as lane_dot_q's steps for those units. (The kernel loads the
// activations of all K units before waiting for the weights when x_first<NC>; the arithmetic is
// this.)
template <class T, int NC, int R, int K>
POLYKV_HD void staged_lane_step(const uint8_t* const (&bufs)[R], const Stage<T, K>& st, const int8_t* xq,
                                const ActScale* xs, int64_t n_in, int ncols, int lane, float (&acc)[R][NC]) {
#pragma unroll
  for (int k = 0; k < K; ++k) {
    int64_t blk;
    int part;
    if (!staged_unit<T, K>(st, lane, k, blk, part)) return;
    typename T::Unit wu[R];
    staged_decode<T, R, K>(bufs, st, blk, part, wu);
    if constexpr (x_first<NC>()) {
      XCols<T, NC> x;
      load_x_cols<T, NC>(xq, xs, n_in, ncols, blk, part, x);
      dot_cols<T, NC, R>(wu, x, acc);
    } else {
      unit_step<T, NC, R>(wu, xq, xs, n_in, ncols, blk, part, acc);
    }
  }
}

// Float weights: x is an f32 copy padded with zeros to ldx (a multiple of 8) values per column, 16-byte
// aligned. acc[r][c] += w * x one value at a time, in order.
POLYKV_HD void ld_f32x4(const float* p, float* out) {
#ifdef __CUDA_ARCH__
  const float4 v = *reinterpret_cast<const float4*>(p);
  out[0] = v.x; out[1] = v.y; out[2] = v.z; out[3] = v.w;
#else
  std::memcpy(out, p, 16);
#endif
}

// The activations of float unit u (values u*V ..) for NC columns (columns >= ncols repeat the last).
template <int V, int NC>
struct XFCols {
  float v[NC][V];
};

template <int V, int NC>
POLYKV_HD void load_xf_cols(const float* xp, int64_t ldx, int64_t u, int ncols, XFCols<V, NC>& x) {
#pragma unroll
  for (int c = 0; c < NC; ++c) {
    const int cc = c < ncols ? c : ncols - 1;
#pragma unroll
    for (int i = 0; i < V; i += 4) ld_f32x4(xp + int64_t(cc) * ldx + u * V + i, x.v[c] + i);
  }
}

// acc[r][c] += w * x one value at a time, in order.
template <int V, int NC, int R>
POLYKV_HD void float_dot_cols(const FUnit<V> (&wu)[R], const XFCols<V, NC>& x, float (&acc)[R][NC]) {
#pragma unroll
  for (int c = 0; c < NC; ++c) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int i = 0; i < V; ++i) acc[r][c] = fma(wu[r].w[i], x.v[c][i], acc[r][c]);
    }
  }
}

// Unit u of R rows times NC columns, column by column (the activations of one column at a time: the
// registers of wide calls); the same operations per acc[r][c] as load_xf_cols + float_dot_cols.
template <int V, int NC, int R>
POLYKV_HD void float_unit_step(const FUnit<V> (&wu)[R], const float* xp, int64_t ldx, int64_t u, int ncols,
                               float (&acc)[R][NC]) {
#pragma unroll
  for (int c = 0; c < NC; ++c) {
    const int cc = c < ncols ? c : ncols - 1;
    XFCols<V, 1> x;
    load_xf_cols<V, 1>(xp + int64_t(cc) * ldx, ldx, u, 1, x);
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int i = 0; i < V; ++i) acc[r][c] = fma(wu[r].w[i], x.v[0][i], acc[r][c]);
    }
  }
}

template <class F, int NC, int R, bool kVec>
POLYKV_HD void lane_dot_f(const uint8_t* const (&rows)[R], const float* xp, int64_t ldx, int64_t n_in, int ncols,
                          int lane, float (&acc)[R][NC]) {
  constexpr int V = F::kValues;
  constexpr int U = 2;  // units per row loaded before the first is used (memory parallelism)
  const int64_t n_units = (n_in + V - 1) / V;
  for (int64_t u0 = lane; u0 < n_units; u0 += 32 * U) {
    FUnit<V> wu[U][R];
#pragma unroll
    for (int k = 0; k < U; ++k) {
      const int64_t u = u0 + 32 * k;
      if (u < n_units) {
#pragma unroll
        for (int r = 0; r < R; ++r) load_float_unit<F, kVec>(rows[r], u, n_in, wu[k][r]);
      }
    }
#pragma unroll
    for (int k = 0; k < U; ++k) {
      const int64_t u = u0 + 32 * k;
      if (u >= n_units) break;
      float_unit_step<V, NC, R>(wu[k], xp, ldx, u, ncols, acc);
    }
  }
}

// Float rows through the staging of the stream kernel: iteration `it` covers units [32 K it, 32 K it
// + nu) of each row (16 bytes each, the row 16-byte aligned with a 16-byte multiple stride), copied
// as nu whole chunks from row + 512 K it (the last unit's chunk may hold bytes past n_in, never past
// the stride). Lane l computes units u0 + 32 k + l, k = 0..K-1 (lane_dot_f's order), at byte
// 16 (32 k + l) of the copy.
template <int K = 1>
struct FStage {
  static constexpr int kUnitsPerLane = K;
  int64_t u0;
  int nu;
};

template <class F, int K = 1>
POLYKV_HD FStage<K> fstage_plan(int64_t it, int64_t n_in) {
  const int64_t n_units = (n_in + F::kValues - 1) / F::kValues;
  FStage<K> s;
  s.u0 = 32 * K * it;
  const int64_t left = n_units - s.u0;
  s.nu = int(left < 32 * K ? left : 32 * K);
  return s;
}

// The lane's units of iteration st from the staged copies bufs[r] of the R rows, times the
// activations; the same operations as lane_dot_f's steps for those units.
template <class F, int NC, int R, int K>
POLYKV_HD void staged_lane_step_f(const uint8_t* const (&bufs)[R], const FStage<K>& st, const float* xp,
                                  int64_t ldx, int64_t n_in, int ncols, int lane, float (&acc)[R][NC]) {
  constexpr int V = F::kValues;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int j = 32 * k + lane;  // unit of the stage
    if (j >= st.nu) return;
    const int64_t u = st.u0 + j;
    FUnit<V> wu[R];
#pragma unroll
    for (int r = 0; r < R; ++r) load_float_unit_at<F, true>(bufs[r] + 16 * j, u * V, n_in, wu[r]);
    if constexpr (x_first<NC>()) {
      XFCols<V, NC> x;
      load_xf_cols<V, NC>(xp, ldx, u, ncols, x);
      float_dot_cols<V, NC, R>(wu, x, acc);
    } else {
      float_unit_step<V, NC, R>(wu, xp, ldx, u, ncols, acc);
    }
  }
}

// The stream kernel's work split (matmul_cuda_stream.cu): nw warps, warp gw computes rows
// [warp_row_begin(gw), warp_row_begin(gw + 1)) of the n_out rows (counts differ by at most one), R at
// a time. A row's result does not depend on the split (one warp computes it, as above).
POLYKV_HD int64_t warp_row_begin(int64_t gw, int64_t nw, int64_t n_out) { return gw * n_out / nw; }

#if defined(__CUDACC__)
// The warp's final sum on the device: a fixed xor butterfly (partners lane ^ 16, ^ 8, ..., ^ 1), every lane ends
// with the same sum; the order warp_sum_emulated below reproduces.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off /= 2) v = fadd(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}
#endif

// The warp's final sum, emulated: lanes exchange partners lane ^ 16, ^ 8, ..., ^ 1 and each adds its
// own value first (what the device's shuffle butterfly computes; every lane ends with the same sum).
inline float warp_sum_emulated(const float (&v)[32]) {
  float a[32], b[32];
  for (int l = 0; l < 32; ++l) a[l] = v[l];
  for (int off = 16; off > 0; off /= 2) {
    for (int l = 0; l < 32; ++l) b[l] = fadd(a[l], a[l ^ off]);
    for (int l = 0; l < 32; ++l) a[l] = b[l];
  }
  return a[0];
}

// Dequantized values of run r of a unit, times mul (embedding scale; 1 for the prefill tiles).
template <class U>
POLYKV_HD void unit_run_values(const U& u, int r, float mul, float (&out)[16]) {
#pragma unroll
  for (int k = 0; k < 4; ++k) {
#pragma unroll
    for (int j = 0; j < 4; ++j) out[4 * k + j] = fmul(unit_value(u, 4 * r + k, j), mul);
  }
}

}  // namespace polykv::cuda::hd
