// Mat-vec kernel, dequantization and upload of weights in the split layout (matmul_cuda_split.cuh:
// q4_0, q8_0, q4_K, q5_K, q6_K with each row's unit quants 16-byte aligned and contiguous, the block scales
// after).
//
// Why (docs/CUDA_DECODE.md, "Split weights"): decode streams every weight byte once, so a mat-vec
// should read near copy bandwidth. The stream kernel (matmul_cuda_stream.cu) copies ggml rows through
// shared memory (their 18-byte q4_0 blocks are only 2-byte aligned) and ran at ~45% of it on the H200.
// Here every lane loads its units straight into registers with 16-byte loads, 32 lanes reading 512
// contiguous bytes of a row per instruction:
//  * One warp per group of R consecutive rows of one part (R = 2 for 1-2 columns, 4 for more: the
//    activations, read from L1, serve R rows), blocks of 8 warps, one launch over all groups (no
//    persistent grid: the block scheduler balances the tail).
//  * A warp walks its rows' units in steps j (unit 32 j + lane for lane `lane`), U steps at a time:
//    the U x R loads of a chunk (8 x 16 bytes per lane, ~4 KB per warp) are issued before any is
//    used, so with 16-32 warps per SM 64-128 KB are in flight per SM (an H200 needs ~40 KB per SM:
//    4.8 TB/s x ~1 us / 132 SMs).
//  * The first chunk's loads are issued before waiting for the activation kernel (PDL).
// Lane l computes units l, l + 32, ... of each row in that order with hd::unit_step, then the same
// butterfly as every other mat-vec kernel: the results are bit-identical to the stream kernel's and
// the direct kernel's on the ggml rows (tests/cuda/matvec_split_cuda_test.cpp), batch invariant.
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <span>
#include <type_traits>
#include <vector>

#include "backend/cuda/deferred_norm.cuh"
#include "backend/cuda/dequant_tile_staged.cuh"
#include "backend/cuda/matmul_cuda_internal.h"
#include "backend/cuda/matmul_cuda_launch.cuh"
#include "backend/cuda/matmul_cuda_acts.cuh"
#include "backend/cuda/ops_cuda_math.cuh"
#include "backend/cuda/matmul_cuda_split.cuh"
#include "backend/cuda/matmul_cuda_split.h"
#include "core/error.h"

namespace polykv::cuda {
namespace {

constexpr int kSplitWarps = 8;
constexpr int kSplitThreads = 32 * kSplitWarps;

// Rows per warp (R) and steps per chunk (U) for decoder T and NC columns: 8 16-byte loads per lane in
// a chunk for 1-2 columns, 4 for more (their accumulators and activations need the registers; more
// spilled), a 16-byte head counting as one load.
// (q4_K with 3 steps a chunk at 1-2 columns instead of 2 decoded 7-8% slower on an H100, 2026-12-05d H3.)
template <class T, int NC>
struct SplitCfg {
  static constexpr int kR = NC <= 2 ? 2 : 4;
  static constexpr int kLoadsPerUnit = hd::Split<T>::kLoadsPerUnit;
  static constexpr int kLoads = NC <= 2 ? 8 : 4;
  static constexpr int kU = kLoads / (kR * kLoadsPerUnit) > 0 ? kLoads / (kR * kLoadsPerUnit) : 1;
};

// Arguments (by value). Groups of R rows are numbered part after part (a part's last group may be
// short); part p's groups start at gbegin[p]. xq / xs / y start at the call's first column.
struct SplitArgs {
  const uint8_t* w[kMaxMatvecParts];
  float* y[kMaxMatvecParts];  // [ncols][part_rows[p]]
  int64_t gbegin[kMaxMatvecParts], part_rows[kMaxMatvecParts];
  int n_parts;
  size_t stride;
  int64_t n_groups, n_in;
  hd::SplitGeom geom;
  const int8_t* xq;        // [ncols][n_in]
  const hd::ActScale* xs;  // [ncols][n_in / 32]
  int ncols;
  DeferredNorm dn;  // dn.ss: [ncols][n_in / 32] from the call's first column; outputs scaled by deferred_inv
};

struct GroupPart {
  const uint8_t* w;
  float* y;
  int64_t gbegin, rows;
  int index;  // the part's
};

// Selects on constant indices (no local-memory copy of the arguments).
__device__ __forceinline__ GroupPart group_part(const SplitArgs& a, int64_t g) {
  GroupPart p{a.w[0], a.y[0], 0, a.part_rows[0], 0};
#pragma unroll
  for (int i = 1; i < kMaxMatvecParts; ++i)
    if (i < a.n_parts && g >= a.gbegin[i]) p = GroupPart{a.w[i], a.y[i], a.gbegin[i], a.part_rows[i], i};
  return p;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off /= 2) v = hd::fadd(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// Blocks per SM the registers must allow: 3 for one column (<= 85 registers: 24 warps per SM), 2 for
// more (<= 128: 16 warps); unbounded, 8 columns took ~180 registers (8 warps per SM).
template <int NC>
__host__ __device__ constexpr int split_min_blocks() { return NC == 1 ? 3 : 2; }

// What split_group does with its dot products: store them to y; store them plus the part's bias (StoreBias: v's
// in the two-type q, k, v launch; a template value so that the plain kernels hold no bias code); or (one column,
// R = 2) add the biases, rotate the pair of rows of parts 0 and 1 (q and k) that a RoPE pair rotates, (2i, 2i + 1)
// in Norm style, (i, i + n_rot / 2) in Neox style, and store them (the bits of add_bias and rope_qk after the
// mat-vec: add_rn, then rope_pair's operations on the same two floats).
enum class Epi { Store, StoreBias, Rope };

// The dot products of R rows (rows[r], r < nrows; the others are not loaded and stay 0) with the
// activations of every column: lane `lane`'s partial sums in acc (warp_sum adds the lanes'). Waits
// for the previous grid (PDL) after issuing the first chunk's weight loads.
// inv: each column's deferred-norm scale (a.dn.ss; else 1), computed right after the PDL wait: its loads hit
// L2 while the first chunk's weight loads are still in flight, so no warp waits for them at its end.
template <class T, int NC, int R, int U>
__device__ __forceinline__ void split_dots(const SplitArgs& a, const uint8_t* const (&rows)[R], int nrows, int lane,
                                           float (&acc)[R][NC], float (&inv)[NC]) {
  using S = hd::Split<T>;
  constexpr int QW = S::kUnitWords, HW = S::kHeadWords;
  const int64_t n_units = a.geom.n_units, n_steps = (n_units + 31) / 32;
  bool waited = false;
  for (int64_t j0 = 0; j0 < n_steps; j0 += U) {
    uint32_t q[U][R][QW], h[U][R][HW];
    hd::split_load_chunk<T, R, U>(rows, a.geom, j0, lane, nrows, q, h);
    if (!waited) {
      wait_for_previous_grid();  // the activations come from the kernel before this one
      waited = true;
      if (a.dn.ss != nullptr) {
        const int nb = a.dn.cols / int(hd::kActBlock);
#pragma unroll
        for (int c = 0; c < NC; ++c)
          if (c < a.ncols) inv[c] = deferred_inv(a.dn.ss + int64_t(c) * nb, a.dn.cols, a.dn.eps, lane);
      }
    }
#pragma unroll
    for (int k = 0; k < U; ++k) {
      const int64_t u = 32 * (j0 + k) + lane;
      if (u < n_units) {
        const int64_t blk = u / T::kParts;
        static_assert(32 % T::kParts == 0, "a lane's units are all of one part");
        const int part = lane % T::kParts;  // = u % kParts: the same for every step (per-part work hoists)
        typename T::Unit wu[R];
#pragma unroll
        for (int r = 0; r < R; ++r) S::decode(q[k][r], h[k][r], part, wu[r]);
        hd::unit_step<T, NC, R>(wu, a.xq, a.xs, a.n_in, a.ncols, blk, part, acc);
      }
    }
  }
}

// Part i's bias in rope.bias (constant indices: no local-memory copy of the kernel parameter).
__device__ __forceinline__ const float* part_bias(const SplitRope& rope, int i) {
  const float* b = rope.bias[0];
  if (i == 1) b = rope.bias[1];
  if (i == 2) b = rope.bias[2];
  return b;
}

// The rows of q, k and v that warp group gi of part `part` takes in the Rope epilogue (R = 2), in the part: Norm
// style and v: rows 2 gi and 2 gi + 1, as every other epilogue; Neox style, q and k: the pair a rotation takes,
// (j, j + n_rot / 2) of head gi / (head_dim / 2) for j = gi % (head_dim / 2) < n_rot / 2, and the unrotated dims
// past n_rot two by two (n_rot + 2 (j - n_rot / 2), + 1) for the other j. freq: inv_freq's index of the rotation,
// -1 for none. Every part's rows are whole heads (matvec_split_rope_ok), so both rows are in the part.
struct RopeRows {
  int64_t a, b;
  int freq;
};
__device__ __forceinline__ RopeRows rope_rows(const SplitRope& rope, int part, int64_t gi) {
  if (part >= 2) return RopeRows{2 * gi, 2 * gi + 1, -1};
  if (rope.style == RopeStyle::Norm) {
    const int d = int((2 * gi) % rope.head_dim);  // even
    return RopeRows{2 * gi, 2 * gi + 1, d < rope.n_rot ? d / 2 : -1};
  }
  const int half = rope.head_dim / 2, half_rot = rope.n_rot / 2;
  const int64_t base = (gi / half) * rope.head_dim;
  const int j = int(gi % half);
  if (j < half_rot) return RopeRows{base + j, base + j + half_rot, j};
  const int64_t a = base + rope.n_rot + 2 * (j - half_rot);
  return RopeRows{a, a + 1, -1};
}

// rope: the Rope epilogue's biases and rotation (Epi::Rope), or StoreBias's biases (rope.bias[part]; null: none).
template <class T, int NC, Epi kEpi>
__device__ __forceinline__ void split_group(const SplitArgs& a, int64_t g, int lane, const SplitRope& rope) {
  using Cfg = SplitCfg<T, NC>;
  constexpr int R = Cfg::kR, U = Cfg::kU;
  const GroupPart gp = group_part(a, g);
  const int64_t row0 = (g - gp.gbegin) * R;  // in the part
  const int nrows = int(gp.rows - row0 < R ? gp.rows - row0 : R);
  const float* bias = kEpi == Epi::Store ? nullptr : part_bias(rope, gp.index);
  const uint8_t* rows[R];
  RopeRows rr{row0, row0 + 1, -1};
  float b0 = 0.0f, b1 = 0.0f;  // Rope: the two rows' biases, loaded before the dot products (weights: no PDL wait)
  if constexpr (kEpi == Epi::Rope) {
    static_assert(NC == 1 && R == 2, "the rope epilogue pairs the warp's two rows of one column");
    rr = rope_rows(rope, gp.index, g - gp.gbegin);
    rows[0] = gp.w + size_t(rr.a) * a.stride;
    rows[1] = gp.w + size_t(nrows == 2 ? rr.b : rr.a) * a.stride;
    if (bias != nullptr) {
      b0 = bias[rr.a];
      if (nrows == 2) b1 = bias[rr.b];
    }
  } else {
#pragma unroll
    for (int r = 0; r < R; ++r) rows[r] = gp.w + size_t(row0 + min(r, nrows - 1)) * a.stride;
  }
  float acc[R][NC] = {};
  // A deferred norm (ops_cuda_acts.h): column c's outputs times its row's inverse norm inv[c], the same bits
  // in every lane and every warp (deferred_inv).
  float inv[NC];
#pragma unroll
  for (int c = 0; c < NC; ++c) inv[c] = 1.0f;
  split_dots<T, NC, R, U>(a, rows, nrows, lane, acc, inv);
  const bool scaled = a.dn.ss != nullptr;
  // Every lane holds every (r, c) sum after warp_sum (the same bits in every lane: the butterfly's
  // adds are commutative); lane (r * NC + c) % 32 stores it. The order of the plain ops: the mat-vec's output
  // (times a deferred norm's scale), add_bias, rope_qk.
  if constexpr (kEpi == Epi::Rope) {
    float v0 = warp_sum(acc[0][0]), v1 = warp_sum(acc[1][0]);
    if (scaled) {
      v0 = math::mul_rn(v0, inv[0]);
      v1 = math::mul_rn(v1, inv[0]);
    }
    if (bias != nullptr) {
      v0 = math::add_rn(v0, b0);
      v1 = math::add_rn(v1, b1);
    }
    if (rr.freq >= 0 && nrows == 2) {
      const float angle = math::rope_angle(rope.pos[0], rope.scale, rope.inv_freq[rr.freq]);
      const float cs = cosf(angle), sn = sinf(angle);
      const float y0 = math::sub_rn(math::mul_rn(v0, cs), math::mul_rn(v1, sn));
      const float y1 = math::add_rn(math::mul_rn(v0, sn), math::mul_rn(v1, cs));
      v0 = y0;
      v1 = y1;
    }
    if (lane == 0) gp.y[rr.a] = v0;
    if (lane == 1 && nrows == 2) gp.y[rr.b] = v1;
  } else {
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int c = 0; c < NC; ++c) {
        float v = warp_sum(acc[r][c]);
        if (scaled) v = math::mul_rn(v, inv[c]);
        if (lane == (r * NC + c) % 32 && c < a.ncols && r < nrows) {
          if constexpr (kEpi == Epi::StoreBias) {
            if (bias != nullptr) v = math::add_rn(v, bias[row0 + r]);
          }
          gp.y[int64_t(c) * gp.rows + row0 + r] = v;
        }
      }
    }
  }
}

template <class T, int NC>
__global__ void __launch_bounds__(kSplitThreads, split_min_blocks<NC>()) matvec_split_kernel(const SplitArgs a) {
  // The next kernel, if launched with PDL, may start now; it waits for this grid before it touches
  // anything this grid reads or writes.
  allow_next_grid();
  const int lane = int(threadIdx.x % 32);
  const int64_t g = int64_t(blockIdx.x) * kSplitWarps + threadIdx.x / 32;
  if (g >= a.n_groups) return;  // the whole warp
  split_group<T, NC, Epi::Store>(a, g, lane, SplitRope{});
}

// One column of q, k, v (parts 0, 1, 2) with their biases added and q and k rotated by RoPE in the epilogue
// (matvec_split_rope): the bits of the plain kernel, then add_bias, then rope_qk.
template <class T>
__global__ void __launch_bounds__(kSplitThreads, split_min_blocks<1>())
    matvec_split_rope_kernel(const SplitArgs a, const SplitRope rope) {
  allow_next_grid();
  const int lane = int(threadIdx.x % 32);
  const int64_t g = int64_t(blockIdx.x) * kSplitWarps + threadIdx.x / 32;
  if (g >= a.n_groups) return;
  split_group<T, 1, Epi::Rope>(a, g, lane, rope);
}

// One column of parts of two types: a's parts of TA, then b's of TB (b's groups after a's), for the layers of a
// K-quant mix whose attention V got more bits (quant/weight_mix.h: q4_K_M puts attn_v in q6_K in half the layers).
// kEpiA = Rope: a holds q and k, biased and rotated as matvec_split_rope_kernel does; b's rows (v) then get
// rope.bias[2]. Store: the plain kernel's (a matmul_multi: models with q, k norms, Qwen 3). A
// warp runs one type's path with the one-type kernels' operations for its rows, so the bits of separate launches.
// Bounded as the one-type kernel (3 blocks an SM, 80 registers), where ptxas spills ~70 bytes a thread: measured
// faster than 2 blocks an SM without spills (call H16, H100, synth llama-3.1-8b q4_K_M at depth 0: 1.054x against
// 1.039x over three launches, f16/f16).
template <class TA, class TB, Epi kEpiA>
__global__ void __launch_bounds__(kSplitThreads, split_min_blocks<1>())
    matvec_split_two_kernel(const SplitArgs a, const SplitArgs b, const SplitRope rope) {
  allow_next_grid();
  const int lane = int(threadIdx.x % 32);
  const int64_t g = int64_t(blockIdx.x) * kSplitWarps + threadIdx.x / 32;
  if (g >= a.n_groups) {
    if (g - a.n_groups >= b.n_groups) return;
    if constexpr (kEpiA == Epi::Rope) {
      SplitRope vb;  // b's one bias: v's
      vb.bias[0] = rope.bias[2];
      split_group<TB, 1, Epi::StoreBias>(b, g - a.n_groups, lane, vb);
    } else {
      split_group<TB, 1, Epi::Store>(b, g - a.n_groups, lane, SplitRope{});
    }
    return;
  }
  split_group<TA, 1, kEpiA>(a, g, lane, rope);
}

// The (q and k type, v type) pairs that matvec_split_two_kernel is built for: q4_K_M's and q5_K_M's (v in q6_K),
// llama.cpp q4_K_S's (v in q5_K).
template <class Fn>
bool visit_split_type_pair(DType qk, DType v, Fn&& fn) {
  if (qk == DType::Q4_K && v == DType::Q6_K) return fn(hd::DecQ4_K{}, hd::DecQ6_K{}), true;
  if (qk == DType::Q5_K && v == DType::Q6_K) return fn(hd::DecQ5_K{}, hd::DecQ6_K{}), true;
  if (qk == DType::Q4_K && v == DType::Q5_K) return fn(hd::DecQ4_K{}, hd::DecQ5_K{}), true;
  return false;
}

// POLYKV_CUDA_ROPE2=0: no two-type launch (a v of another type falls back to matmul_multi, then rope_qk: the path
// before 2026-12-06c, for A/B runs).
bool two_type_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("POLYKV_CUDA_ROPE2");
    return e == nullptr || std::atoi(e) != 0;
  }();
  return on;
}

// Fills a's parts (at most kMaxMatvecParts; unused slots repeat the last part) for decoder T and columns
// [col0, col0 + ncols) of NC at most.
template <class T, int NC = 1>
void fill_split_args(SplitArgs& a, std::span<const MatvecPart> parts, const ActView& av, int col0 = 0,
                     int ncols = 1) {
  constexpr int R = SplitCfg<T, NC>::kR;
  const WeightMatrix& w0 = *parts[0].w;
  a.n_parts = int(parts.size());
  int64_t gb = 0;
  for (int i = 0; i < kMaxMatvecParts; ++i) {
    const MatvecPart& part = parts[size_t(std::min(i, a.n_parts - 1))];
    a.w[i] = static_cast<const uint8_t*>(part.w->data);
    a.y[i] = part.y + int64_t(col0) * part.w->n_out;
    a.part_rows[i] = part.w->n_out;
    a.gbegin[i] = gb;
    if (i < a.n_parts) gb += (part.w->n_out + R - 1) / R;
  }
  a.n_groups = gb;
  a.stride = w0.row_stride;
  a.n_in = w0.n_in;
  a.geom = hd::split_geom<T>(w0.n_in);
  a.xq = av.qs + int64_t(col0) * w0.n_in;
  a.xs = av.s + int64_t(col0) * (w0.n_in / hd::kActBlock);
  a.ncols = ncols;
  a.dn = av.dn;
  if (a.dn.ss != nullptr) {
    check(a.dn.cols == w0.n_in, "CUDA matvec: a deferred norm of rows of ", a.dn.cols, " for n_in ", w0.n_in);
    a.dn.ss += int64_t(col0) * (w0.n_in / hd::kActBlock);
  }
}

// One run of 16 values to dst with 16-byte stores when dst is 16-byte aligned (always for rows of a
// cudaMalloc'd buffer: runs start at multiples of 16 values and rows hold multiples of 32), element
// stores otherwise. Same values either way (Out(v) per element). Element stores of 2 bytes at a 64-byte
// stride between the lanes of a warp used 1/16 of each written sector: prefill (which dequantizes every
// weight to f16 tiles) ran at 0.39x its speed with the ggml rows (pp512 5165 vs 13311 tok/s, H200).
__device__ inline void store_run16(__half* dst, const float (&v)[16]) {
  if ((reinterpret_cast<uintptr_t>(dst) & 15) == 0) {
    hd::store_run16_f16(dst, v);  // the same halves: both round to nearest even
  } else {
#pragma unroll
    for (int k = 0; k < 16; ++k) dst[k] = __half(v[k]);
  }
}
__device__ inline void store_run16(float* dst, const float (&v)[16]) {
  if ((reinterpret_cast<uintptr_t>(dst) & 15) == 0) {
#pragma unroll
    for (int k = 0; k < 4; ++k) reinterpret_cast<float4*>(dst)[k] = make_float4(v[4 * k], v[4 * k + 1], v[4 * k + 2], v[4 * k + 3]);
  } else {
#pragma unroll
    for (int k = 0; k < 16; ++k) dst[k] = v[k];
  }
}

// Dequantization of split rows: one thread per unit. Row i of the output is row row0 + i of w, or row
// rows[i] when rows is not null (NaN values for an index outside [0, n_out)). Out: float or __half.
template <class T, class Out>
__global__ void dequantize_split_kernel(const uint8_t* __restrict__ w, size_t stride, hd::SplitGeom geom,
                                        int64_t n_out, int64_t n_in, int64_t row0, const int32_t* __restrict__ rows,
                                        int64_t total_units, float scale, Out* __restrict__ dst) {
  using S = hd::Split<T>;
  const int64_t n_units = geom.n_units;
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < total_units;
       t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = t / n_units, u = t % n_units;
    const int64_t blk = u / T::kParts;
    const int part = int(u % T::kParts);
    const int64_t row = rows ? int64_t(rows[i]) : row0 + i;
    Out* out = dst + i * n_in + blk * T::kBlockValues;
    if (row < 0 || row >= n_out) {
      for (int r = 0; r < T::kRuns; ++r)
        for (int k = 0; k < 16; ++k) out[T::run_pos(part, r) + k] = Out(__int_as_float(0x7fc00000));
      continue;
    }
    uint32_t q[S::kUnitWords], h[S::kHeadWords];
    hd::split_load_unit<T>(w + size_t(row) * stride, geom, u, q, h);
    typename T::Unit unit;
    S::decode(q, h, part, unit);
#pragma unroll
    for (int r = 0; r < T::kRuns; ++r) {
      float v[16];
      hd::unit_run_values(unit, r, scale, v);
      store_run16(out + T::run_pos(part, r), v);
    }
  }
}

// Prefill tiles: rows [row0, row0 + total_units / n_units) of w as f16, dst [rows][n_in]; the same values as
// dequantize_split_kernel, staged (dequant_tile_staged.cuh).
template <class T>
__global__ void __launch_bounds__(hd::kStageThreads)
    dequantize_split_staged_kernel(const uint8_t* __restrict__ w, size_t stride, hd::SplitGeom geom, int64_t row0,
                                   int64_t total_units, __half* __restrict__ dst) {
  using S = hd::Split<T>;
  hd::dequantize_tile_staged<T>(total_units, geom.n_units, dst,
                                [&](int64_t i, int64_t u, int part, typename T::Unit& unit) {
                                  uint32_t q[S::kUnitWords], h[S::kHeadWords];
                                  hd::split_load_unit<T>(w + size_t(row0 + i) * stride, geom, u, q, h);
                                  S::decode(q, h, part, unit);
                                });
}

unsigned grid_stride_blocks(int64_t total, int threads) {
  return unsigned(std::clamp<int64_t>((total + threads - 1) / threads, 1, 65535));
}

template <class T, class Out>
void launch_dequantize(const WeightMatrix& w, int64_t row0, const int32_t* rows, int64_t n, float scale, Out* dst,
                       cudaStream_t s) {
  const hd::SplitGeom geom = hd::split_geom<T>(w.n_in);
  const int64_t total = n * geom.n_units;
  constexpr int kT = 256;
  dequantize_split_kernel<T, Out><<<grid_stride_blocks(total, kT), kT, 0, s>>>(
      static_cast<const uint8_t*>(w.data), w.row_stride, geom, w.n_out, w.n_in, row0, rows, total, scale, dst);
  POLYKV_CUDA_LAUNCHED();
}

template <class T>
void launch_dequantize_staged(const WeightMatrix& w, int64_t row0, int64_t n, __half* dst, cudaStream_t s) {
  const hd::SplitGeom geom = hd::split_geom<T>(w.n_in);
  const int64_t total = n * geom.n_units;
  dequantize_split_staged_kernel<T><<<grid_stride_blocks(total, hd::kStageThreads), hd::kStageThreads, 0, s>>>(
      static_cast<const uint8_t*>(w.data), w.row_stride, geom, row0, total, dst);
  POLYKV_CUDA_LAUNCHED();
}

// POLYKV_CUDA_DEQUANT (prefill tiles; SplitDequant): -1 not read yet.
int g_dequant_variant = -1;
SplitDequant dequant_variant() {
  if (g_dequant_variant < 0) {
    const char* e = std::getenv("POLYKV_CUDA_DEQUANT");
    g_dequant_variant = int(e && std::strcmp(e, "old") == 0 ? SplitDequant::Old : SplitDequant::Staged);
  }
  return SplitDequant(g_dequant_variant);
}

// POLYKV_CUDA_MATVEC: -1 not read yet, 0 unset (split), 1 split, 2 old (ggml rows).
int g_matvec_mode = -1;

}  // namespace

// m when parts [0, m) share one type and stride and parts [m, n) another (all split, one n_in, 0 < m < n) and the two
// types form a pair that matvec_split_two_kernel is built for; else 0 (always 0 with POLYKV_CUDA_ROPE2=0).
size_t split_two_type_prefix(std::span<const MatvecPart> parts) {
  if (!two_type_enabled() || parts.size() < 2 || parts.size() > size_t(kMaxMatvecParts)) return 0;
  const WeightMatrix& w0 = *parts[0].w;
  size_t m = 1;
  while (m < parts.size() && parts[m].w->type == w0.type) ++m;
  if (m == parts.size()) return 0;
  const WeightMatrix& wb = *parts[m].w;
  for (size_t i = 0; i < parts.size(); ++i) {
    const WeightMatrix& w = *parts[i].w;
    const WeightMatrix& first = i < m ? w0 : wb;
    if (w.layout != WeightLayout::CudaSplit || w.type != first.type || w.row_stride != first.row_stride ||
        w.n_in != w0.n_in || w.n_out <= 0)
      return 0;
  }
  return visit_split_type_pair(w0.type, wb.type, [](auto, auto) {}) ? m : 0;
}

bool split_type_enabled(DType t) {
  // q5_K's split layout: on since 2026-12-06 (calls H4, H6, H7: 1.9x decode, 1.17x prefill at 512 tokens
  // against ggml rows on an H100); POLYKV_CUDA_SPLIT_Q5K=0 keeps its ggml rows.
  static const bool q5k = [] {
    const char* e = std::getenv("POLYKV_CUDA_SPLIT_Q5K");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return hd::has_split(t) && (t != DType::Q5_K || q5k);
}

bool split_layout_enabled(DType t) {
  if (g_matvec_mode < 0) {
    const char* e = std::getenv("POLYKV_CUDA_MATVEC");
    g_matvec_mode = (e && std::strcmp(e, "old") == 0) ? 2 : (e && std::strcmp(e, "split") == 0) ? 1 : 0;
  }
  return g_matvec_mode != 2 && split_type_enabled(t);
}

void set_split_layout_enabled(bool on) { g_matvec_mode = on ? 1 : 2; }

bool split_layout_fits(const WeightMatrix& host) {
  return hd::has_split(host.type) && host.n_in > 0 && host.n_in % dtype_info(host.type).block_size == 0 &&
         host.n_out > 0;
}

size_t split_row_stride(DType t, int64_t n_in) {
  size_t out = 0;
  check(hd::visit_split_decoder(t, [&](auto dec) { out = hd::split_geom<decltype(dec)>(n_in).row_bytes; }),
        "split layout: no split layout for ", dtype_name(t));
  return out;
}

void split_pack_rows_host(const WeightMatrix& host, int64_t row0, int64_t rows, uint8_t* dst) {
  check(split_layout_fits(host) && row0 >= 0 && row0 + rows <= host.n_out, "split layout: bad rows");
  hd::visit_split_decoder(host.type, [&](auto dec) {
    hd::split_pack_rows<decltype(dec)>(static_cast<const uint8_t*>(host.data) + size_t(row0) * host.row_stride,
                                       host.row_stride, host.n_in, rows, dst);
  });
}

WeightMatrix upload_split(const WeightMatrix& host, void* dst, cudaStream_t stream) {
  check(host.layout == WeightLayout::Rows && split_layout_fits(host), "split layout: cannot repack ",
        dtype_name(host.type), " ", host.n_out, "x", host.n_in);
  const size_t stride = split_row_stride(host.type, host.n_in);
  // Repacked on the host in chunks of rows (~32 MiB) and copied; the device holds only the split copy.
  const int64_t chunk = std::max<int64_t>(1, int64_t((size_t(32) << 20) / stride));
  std::vector<uint8_t> buf(size_t(std::min(chunk, host.n_out)) * stride);
  for (int64_t r0 = 0; r0 < host.n_out; r0 += chunk) {
    const int64_t n = std::min(chunk, host.n_out - r0);
    split_pack_rows_host(host, r0, n, buf.data());
    POLYKV_CUDA_CHECK(cudaMemcpyAsync(static_cast<uint8_t*>(dst) + size_t(r0) * stride, buf.data(), size_t(n) * stride,
                                      cudaMemcpyHostToDevice, stream));
    POLYKV_CUDA_CHECK(cudaStreamSynchronize(stream));  // buf is reused
  }
  WeightMatrix d = host;
  d.packed = nullptr;
  d.data = dst;
  d.row_stride = stride;
  d.layout = WeightLayout::CudaSplit;
  return d;
}

void validate_split_weights(const WeightMatrix& w) {
  check(hd::has_split(w.type), "CUDA matmul: no split layout for ", dtype_name(w.type));
  check(w.n_in % dtype_info(w.type).block_size == 0, "CUDA matmul: split ", dtype_name(w.type), " rows of ", w.n_in,
        " values");
  check(w.row_stride >= split_row_stride(w.type, w.n_in) && w.row_stride % 16 == 0 &&
            reinterpret_cast<uintptr_t>(w.data) % 16 == 0,
        "CUDA matmul: split ", dtype_name(w.type), " rows must be 16-byte aligned with a stride of at least ",
        split_row_stride(w.type, w.n_in), " bytes (got ", w.row_stride, ")");
}

bool launch_matvec_split_parts(std::span<const MatvecPart> parts, const ActView& av, int col0, int ncols,
                               CudaContext& ctx) {
  if (parts.empty() || parts.size() > size_t(kMaxMatvecParts)) return false;
  const WeightMatrix& w0 = *parts[0].w;
  for (const MatvecPart& p : parts) {
    const WeightMatrix& w = *p.w;
    if (w.layout != WeightLayout::CudaSplit || w.type != w0.type || w.n_in != w0.n_in ||
        w.row_stride != w0.row_stride || w.n_out <= 0)
      return false;
  }
  check(ncols >= 1 && ncols <= kMatvecMaxCols, "CUDA matvec: ", ncols, " columns (1..", kMatvecMaxCols, ")");
  const bool done = hd::visit_split_decoder(w0.type, [&](auto dec) {
    using T = decltype(dec);
    by_width_split(ncols, [&](auto nc) {
      constexpr int NC = decltype(nc)::value;
      SplitArgs a{};
      fill_split_args<T, NC>(a, parts, av, col0, ncols);
      const unsigned grid = unsigned((a.n_groups + kSplitWarps - 1) / kSplitWarps);
      launch_kernel(matvec_split_kernel<T, NC>, dim3(grid), dim3(kSplitThreads), 0, ctx.stream(), matvec_pdl(ctx), a);
    });
  });
  check(done, "CUDA matmul: no split kernel for ", dtype_name(w0.type));
  return true;
}

bool matvec_split_rope_ok(std::span<const MatvecPart> qkv, int head_dim, int n_rot) {
  if (qkv.size() != 3 || head_dim <= 0 || head_dim % 2 != 0 || n_rot < 0 || n_rot % 2 != 0 || n_rot > head_dim ||
      qkv[0].w->n_out % head_dim != 0 || qkv[1].w->n_out % head_dim != 0)
    return false;
  if (split_two_type_prefix(qkv) == 2) return true;  // q and k of one type, v of another (a K-quant mix's layer)
  const WeightMatrix& w0 = *qkv[0].w;
  for (const MatvecPart& p : qkv) {
    const WeightMatrix& w = *p.w;
    if (w.layout != WeightLayout::CudaSplit || !hd::has_split(w.type) || w.type != w0.type || w.n_in != w0.n_in ||
        w.row_stride != w0.row_stride || w.n_out <= 0)
      return false;
  }
  return true;
}

bool launch_matvec_split_rope(std::span<const MatvecPart> qkv, const ActView& av, const SplitRope& rope,
                              CudaContext& ctx) {
  if (!matvec_split_rope_ok(qkv, rope.head_dim, rope.n_rot)) return false;
  const WeightMatrix& w0 = *qkv[0].w;
  if (split_two_type_prefix(qkv) == 2) {
    return visit_split_type_pair(w0.type, qkv[2].w->type, [&](auto qk_dec, auto v_dec) {
      using TQK = decltype(qk_dec);
      using TV = decltype(v_dec);
      SplitArgs a{}, b{};
      fill_split_args<TQK>(a, qkv.subspan(0, 2), av);
      fill_split_args<TV>(b, qkv.subspan(2, 1), av);
      const unsigned grid = unsigned((a.n_groups + b.n_groups + kSplitWarps - 1) / kSplitWarps);
      launch_kernel(matvec_split_two_kernel<TQK, TV, Epi::Rope>, dim3(grid), dim3(kSplitThreads), 0, ctx.stream(),
                    matvec_pdl(ctx), a, b, rope);
    });
  }
  return hd::visit_split_decoder(w0.type, [&](auto dec) {
    using T = decltype(dec);
    SplitArgs a{};
    fill_split_args<T>(a, qkv, av);
    const unsigned grid = unsigned((a.n_groups + kSplitWarps - 1) / kSplitWarps);
    launch_kernel(matvec_split_rope_kernel<T>, dim3(grid), dim3(kSplitThreads), 0, ctx.stream(), matvec_pdl(ctx), a,
                  rope);
  });
}

bool launch_matvec_split_parts2(std::span<const MatvecPart> parts, const ActView& av, int ncols, CudaContext& ctx) {
  const size_t m = split_two_type_prefix(parts);
  if (ncols != 1 || m == 0) return false;
  const DType ta = parts[0].w->type, tb = parts[m].w->type;
  return visit_split_type_pair(ta, tb, [&](auto a_dec, auto b_dec) {
    using TA = decltype(a_dec);
    using TB = decltype(b_dec);
    SplitArgs a{}, b{};
    fill_split_args<TA>(a, parts.subspan(0, m), av);
    fill_split_args<TB>(b, parts.subspan(m), av);
    const unsigned grid = unsigned((a.n_groups + b.n_groups + kSplitWarps - 1) / kSplitWarps);
    launch_kernel(matvec_split_two_kernel<TA, TB, Epi::Store>, dim3(grid), dim3(kSplitThreads), 0, ctx.stream(),
                  matvec_pdl(ctx), a, b, SplitRope{});
  });
}

void set_split_dequant(SplitDequant v) { g_dequant_variant = int(v); }

void dequantize_split_tile_f16(const WeightMatrix& w, int64_t row0, int64_t rows, void* dst, cudaStream_t s) {
  const bool done = hd::visit_split_decoder(w.type, [&](auto dec) {
    using T = decltype(dec);
    __half* d = static_cast<__half*>(dst);
    if (dequant_variant() == SplitDequant::Old)
      launch_dequantize<T, __half>(w, row0, nullptr, rows, 1.0f, d, s);
    else
      launch_dequantize_staged<T>(w, row0, rows, d, s);
  });
  check(done, "CUDA matmul: no split layout for ", dtype_name(w.type));
}

void dequantize_split_rows(const WeightMatrix& w, const int32_t* rows, int n, float scale, float* dst,
                           cudaStream_t s) {
  const bool done = hd::visit_split_decoder(w.type, [&](auto dec) {
    launch_dequantize<decltype(dec), float>(w, 0, rows, n, scale, dst, s);
  });
  check(done, "CUDA matmul: no split layout for ", dtype_name(w.type));
}

}  // namespace polykv::cuda
