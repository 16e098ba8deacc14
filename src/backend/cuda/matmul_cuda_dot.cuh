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

// Staging of quantized rows through shared memory (a lane's own narrow loads of its block would touch
// many cache lines per warp instruction where blocks are not 16-byte multiples; for every type, the
// asynchronous copies give the memory parallelism):
// iteration `it` of a warp covers units [32 it, 32 it + 32) of each of its rows, i.e. blocks
// [blk0, blk0 + nb), nb <= kStageBlocks. The warp copies the 16-byte aligned chunks holding those
// bytes (from the row, which must start 16-byte aligned and have a 16-byte multiple stride, so the
// copy never leaves [row, row + stride)) to shared memory; block b is then at byte lead + (b - blk0) *
// kBlockBytes of the copy. kStageChunks bounds the chunk count of any iteration.
template <class T>
struct Stage {
  static constexpr int kBlocks = 32 / T::kParts;
  static constexpr int kBytes = kBlocks * T::kBlockBytes;
  static constexpr int kChunks = (kBytes + 15) / 16 + 1;
  int64_t blk0;
  int nb, lead, chunks;
};

template <class T>
POLYKV_HD Stage<T> stage_plan(int64_t it, int64_t n_blocks) {
  Stage<T> s;
  s.blk0 = it * Stage<T>::kBlocks;
  const int64_t left = n_blocks - s.blk0;
  s.nb = int(left < Stage<T>::kBlocks ? left : Stage<T>::kBlocks);
  s.lead = int((s.blk0 * T::kBlockBytes) % 16);
  s.chunks = (s.lead + s.nb * T::kBlockBytes + 15) / 16;
  return s;
}

// First byte of the chunks iteration st copies from a row (16-byte aligned).
template <class T>
POLYKV_HD const uint8_t* stage_source(const uint8_t* row, const Stage<T>& st) {
  return row + st.blk0 * T::kBlockBytes - st.lead;
}

// The lane's unit of iteration st (unit blk0 * kParts + lane, if it exists), decoded from the staged
// copies bufs[r] of the R rows, times the activations; the same operations as lane_dot_q's step
// for that unit (blocks keep their alignment mod 16 in the copy, so the loads are those of A =
// kMaxAlign).
template <class T, int NC, int R>
POLYKV_HD void staged_lane_step(const uint8_t* const (&bufs)[R], const Stage<T>& st, const int8_t* xq,
                                const ActScale* xs, int64_t n_in, int ncols, int lane, float (&acc)[R][NC]) {
  const int64_t u = st.blk0 * T::kParts + lane;
  if (u >= (st.blk0 + st.nb) * T::kParts) return;
  const int64_t blk = u / T::kParts;
  const int part = int(u % T::kParts);
  typename T::Unit wu[R];
#pragma unroll
  for (int r = 0; r < R; ++r)
    T::template load<T::kMaxAlign>(bufs[r] + st.lead + (blk - st.blk0) * T::kBlockBytes, part, wu[r]);
  unit_step<T, NC, R>(wu, xq, xs, n_in, ncols, blk, part, acc);
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
#pragma unroll
      for (int c = 0; c < NC; ++c) {
        const int cc = c < ncols ? c : ncols - 1;
        float xv[V];
#pragma unroll
        for (int i = 0; i < V; i += 4) ld_f32x4(xp + int64_t(cc) * ldx + u * V + i, xv + i);
#pragma unroll
        for (int r = 0; r < R; ++r) {
#pragma unroll
          for (int i = 0; i < V; ++i) acc[r][c] = fma(wu[k][r].w[i], xv[i], acc[r][c]);
        }
      }
    }
  }
}

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
