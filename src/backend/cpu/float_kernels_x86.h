// Float-weight (f32 / f16 / bf16) kernels shared by the AVX2 and AVX-512 TUs, written once over a
// vector policy `Ops` and a weight-row policy `Row` (see the *_avx2.cpp / *_avx512.cpp files).
//
// Batch invariance (issue #8): every (row, token) dot is computed in one fixed order, whatever the
// kernel's shape (R rows × NT tokens) or the token's place in the call: one vector accumulator, FMA'd
// with the products of consecutive vectors of Ops::kLanes values from i = 0, then one step for the
// n % kLanes tail with the missing lanes zero (masked loads), then Ops::reduce. So the row kernel
// (R = 1) and every tile shape give bit-identical results, and matmul may choose the shape by
// n_tokens. Independent FMA chains (to hide the FMA latency) come from the R * NT (row, token) pairs,
// never from splitting one dot over several accumulators.
//
// Ops must provide:
//   V, kLanes                              the float vector type and its lane count
//   V zero(); V fma(V a, V b, V c);        a * b + c
//   float reduce(V v)                      horizontal sum, in a fixed order
//   V load(const float* p); V load_part(const float* p, int count)     count < kLanes, rest zero
// Row must provide T (the stored element type) and the same two loads from const T* (converting
// to f32).
// Small fixed loops carry `#pragma GCC unroll` so that accumulators stay in registers.
// Include only from an ISA TU. Internal linkage (see x86_common.h).
#pragma once
#include <cstddef>
#include <cstdint>

#include "backend/cpu/matmul_kernels.h"

namespace polykv::cpu {
namespace {

// R consecutive rows (row_stride bytes apart) × NT tokens: y[t * ldy + r] = Σ_i W[r][i] * act[t][i].
// Per kLanes values the loop converts each of the R weight vectors once for all NT tokens and loads
// each activation vector once for all R rows.
template <typename Ops, typename Row, int R>
struct FloatTile {
  using T = typename Row::T;
  using V = typename Ops::V;
  static constexpr int L = Ops::kLanes;

  template <int NT>
  static void run(const void* w_rows, size_t row_stride, const ActRow* a, int64_t n, float* y, int64_t ldy) {
    const T* w[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
      w[r] = reinterpret_cast<const T*>(static_cast<const uint8_t*>(w_rows) + size_t(r) * row_stride);
    V acc[R][NT];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) acc[r][t] = Ops::zero();
    // One step of L values at i (count < L: the tail). Keeps the fewer of the R weight or NT
    // activation vectors live across the step (R * NT + min(R, NT) + 1 registers).
    auto step = [&](int64_t i, int count) __attribute__((always_inline)) {
      auto load_w = [&](int r) __attribute__((always_inline)) {
        return count == L ? Row::load(w[r] + i) : Row::load_part(w[r] + i, count);
      };
      auto load_x = [&](int t) __attribute__((always_inline)) {
        return count == L ? Ops::load(a[t].f32 + i) : Ops::load_part(a[t].f32 + i, count);
      };
      if constexpr (NT < R) {
        V x[NT];
#pragma GCC unroll 8
        for (int t = 0; t < NT; ++t) x[t] = load_x(t);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          const V wv = load_w(r);
#pragma GCC unroll 8
          for (int t = 0; t < NT; ++t) acc[r][t] = Ops::fma(wv, x[t], acc[r][t]);
        }
      } else {
        V wv[R];
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) wv[r] = load_w(r);
#pragma GCC unroll 8
        for (int t = 0; t < NT; ++t) {
          const V x = load_x(t);
#pragma GCC unroll 16
          for (int r = 0; r < R; ++r) acc[r][t] = Ops::fma(wv[r], x, acc[r][t]);
        }
      }
    };
    int64_t i = 0;
    for (; i + L <= n; i += L) step(i, L);
    if (i < n) step(i, int(n - i));
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t)
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) y[t * ldy + r] = Ops::reduce(acc[r][t]);
  }
};

// The row kernel (RowDotFn, via by_tokens): the tile of one row, so it sums in the same order.
template <typename Ops, typename Row>
struct FloatRow {
  template <int NT>
  static void run(const void* w_row, const ActRow* a, int64_t n, float* out) {
    FloatTile<Ops, Row, 1>::template run<NT>(w_row, 0, a, n, out, 1);
  }
};

// TileDotFn for R rows and 1..kMaxNT tokens.
template <typename Ops, typename Row, int R, int kMaxNT>
void float_tile(const void* w, size_t row_stride, const ActRow* a, int n_tok, int64_t n, float* y,
                int64_t ldy) {
  using K = FloatTile<Ops, Row, R>;
  static_assert(kMaxNT >= 1 && kMaxNT <= 6, "float_tile handles 1..6 tokens");
  switch (n_tok < kMaxNT ? n_tok : kMaxNT) {
    case 1: K::template run<1>(w, row_stride, a, n, y, ldy); break;
    case 2: if constexpr (kMaxNT >= 2) K::template run<2>(w, row_stride, a, n, y, ldy); break;
    case 3: if constexpr (kMaxNT >= 3) K::template run<3>(w, row_stride, a, n, y, ldy); break;
    case 4: if constexpr (kMaxNT >= 4) K::template run<4>(w, row_stride, a, n, y, ldy); break;
    case 5: if constexpr (kMaxNT >= 5) K::template run<5>(w, row_stride, a, n, y, ldy); break;
    default: if constexpr (kMaxNT >= 6) K::template run<6>(w, row_stride, a, n, y, ldy); break;
  }
}

// The float kernels of one ISA for `type` (f32 / f16 / bf16 with row policies F32, F16, BF16):
// the row kernel, the decode tile (kDecodeRows rows × 1 token) and the prefill tile (kRows rows ×
// up to kTokens tokens).
template <typename Ops, typename F32, typename F16, typename BF16, int kDecodeRows, int kRows, int kTokens>
struct FloatKernels {
  static RowDotFn row(DType type) {
    switch (type) {
      case DType::F32: return by_tokens<FloatRow<Ops, F32>>;
      case DType::F16: return by_tokens<FloatRow<Ops, F16>>;
      case DType::BF16: return by_tokens<FloatRow<Ops, BF16>>;
      default: return nullptr;
    }
  }
  template <typename Rw>
  static TileKernel tile_for(bool one_token) {
    if (one_token) return {float_tile<Ops, Rw, kDecodeRows, 1>, kDecodeRows, 1};
    return {float_tile<Ops, Rw, kRows, kTokens>, kRows, kTokens};
  }
  static TileKernel tile(DType type, bool one_token) {
    switch (type) {
      case DType::F32: return tile_for<F32>(one_token);
      case DType::F16: return tile_for<F16>(one_token);
      case DType::BF16: return tile_for<BF16>(one_token);
      default: return {};
    }
  }
};

}  // namespace
}  // namespace polykv::cpu
