// AVX-512 (F/BW/VL/DQ/VNNI) kernels: f32/f16/bf16 rows in 16-wide FMA lanes with masked tails; the
// integer kernels of legacy_kernels_x86.h / kquant_kernels_x86.h instantiated with VNNI ops
// (vpdpbusd / vpdpwssd on 256-bit vectors: one block of 32 values per instruction).
// gcc 12's own avx512fintrin.h trips -Wuninitialized on its _mm512_undefined_* helpers (a known
// false positive in the compiler headers, not in this file).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "backend/cpu/kquant_kernels_x86.h"
#include "backend/cpu/legacy_kernels_x86.h"
#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/x86_common.h"

namespace polykv::cpu {
namespace {

struct VnniOps {
  static __m256i dot_u8s8(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_epi32(acc, u, s); }
  // dpbusd needs an unsigned operand: w ^ 0x80 = w + 128 as u8, so Σ(w+128)·s = Σ w·s + 128·Σ s.
  static __m256i dot_s8s8(__m256i acc, __m256i w, __m256i s, int32_t sum_s) {
    const __m256i u = _mm256_xor_si256(w, _mm256_set1_epi8(int8_t(0x80)));
    return _mm256_dpbusd_epi32(_mm256_sub_epi32(acc, lane0_epi32(128 * sum_s)), u, s);
  }
  static __m256i dot_u8s8_scaled(__m256i acc, __m256i u, __m256i s, __m256i sc16) {
    return _mm256_dpwssd_epi32(acc, _mm256_maddubs_epi16(u, s), sc16);
  }
  static __m256i expand_bit5(uint32_t qh) { return _mm256_maskz_mov_epi8(__mmask32(qh), _mm256_set1_epi8(0x10)); }
};

// Float row element types: T and load(p, mask) turning up to 16 weights at p into f32 (masked-off
// lanes read nothing).
struct F32Row {
  using T = float;
  static __m512 load(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
};
struct F16Row {
  using T = uint16_t;
  static __m512 load(const uint16_t* p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }
};
struct BF16Row {
  using T = uint16_t;
  static __m512 load(const uint16_t* p, __mmask16 m) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
  }
};

// NT tokens against one row: each weight vector is loaded (and converted) once and FMA'd into every
// token's accumulators; U independent accumulators per token hide the FMA latency. The tail (n not
// a multiple of 16) is one masked step.
template <typename Row>
struct FloatDot {
  using T = typename Row::T;
  template <int NT>
  static void run(const void* w_row, const ActRow* a, int64_t n, float* out) {
    constexpr int U = NT == 1 ? 4 : 2;
    const T* w = static_cast<const T*>(w_row);
    const __mmask16 all = 0xFFFF;
    __m512 acc[NT][U];
    for (auto& row : acc)
      for (auto& v : row) v = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 * U <= n; i += 16 * U)
      for (int u = 0; u < U; ++u) {
        const __m512 wv = Row::load(w + i + 16 * u, all);
        for (int t = 0; t < NT; ++t) acc[t][u] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(a[t].f32 + i + 16 * u), acc[t][u]);
      }
    for (; i < n; i += 16) {
      const __mmask16 m = n - i >= 16 ? all : __mmask16((1u << (n - i)) - 1);
      const __m512 wv = Row::load(w + i, m);
      for (int t = 0; t < NT; ++t) acc[t][0] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, a[t].f32 + i), acc[t][0]);
    }
    for (int t = 0; t < NT; ++t) {
      for (int u = 1; u < U; ++u) acc[t][0] = _mm512_add_ps(acc[t][0], acc[t][u]);
      out[t] = _mm512_reduce_add_ps(acc[t][0]);
    }
  }
};

// kTileRows rows × NT tokens: acc[r][t] accumulates 16 lanes of row r · token t; per 16 values the
// loop loads kTileRows weight vectors and NT activation vectors for kTileRows * NT FMAs. The tail
// (n % 16) is one masked step. Loops are fully unrolled to keep acc in registers (<= 24 zmm).
template <typename Row>
struct FloatTile {
  using T = typename Row::T;
  template <int NT>
  static void run(const void* w_rows, size_t row_stride, const ActRow* a, int64_t n, float* y, int64_t ldy) {
    constexpr int R = kTileRows;
    const T* w[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
      w[r] = reinterpret_cast<const T*>(static_cast<const uint8_t*>(w_rows) + size_t(r) * row_stride);
    __m512 acc[R][NT];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 6
      for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
    auto step = [&](int64_t i, __mmask16 m) __attribute__((always_inline)) {
      __m512 wv[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) wv[r] = Row::load(w[r] + i, m);
#pragma GCC unroll 6
      for (int t = 0; t < NT; ++t) {
        const __m512 x = _mm512_maskz_loadu_ps(m, a[t].f32 + i);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], x, acc[r][t]);
      }
    };
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) step(i, 0xFFFF);
    if (i < n) step(i, __mmask16((1u << (n - i)) - 1));
#pragma GCC unroll 6
    for (int t = 0; t < NT; ++t)
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) y[t * ldy + r] = _mm512_reduce_add_ps(acc[r][t]);
  }
};

template <typename K>
void by_tile_tokens(const void* w, size_t row_stride, const ActRow* a, int n_tok, int64_t n, float* y, int64_t ldy) {
  switch (n_tok) {
    case 1: K::template run<1>(w, row_stride, a, n, y, ldy); break;
    case 2: K::template run<2>(w, row_stride, a, n, y, ldy); break;
    case 3: K::template run<3>(w, row_stride, a, n, y, ldy); break;
    case 4: K::template run<4>(w, row_stride, a, n, y, ldy); break;
    case 5: K::template run<5>(w, row_stride, a, n, y, ldy); break;
    default: K::template run<6>(w, row_stride, a, n, y, ldy); break;
  }
}
static_assert(kTileTokens == 6, "by_tile_tokens handles 1..6 tokens");

}  // namespace

TileDotFn tile_dot_avx512(DType type) {
  switch (type) {
    case DType::F32: return by_tile_tokens<FloatTile<F32Row>>;
    case DType::F16: return by_tile_tokens<FloatTile<F16Row>>;
    case DType::BF16: return by_tile_tokens<FloatTile<BF16Row>>;
    default: return nullptr;
  }
}

RowDotFn row_dot_avx512(DType type) {
  switch (type) {
    case DType::F32: return by_tokens<FloatDot<F32Row>>;
    case DType::F16: return by_tokens<FloatDot<F16Row>>;
    case DType::BF16: return by_tokens<FloatDot<BF16Row>>;
    default:
      if (RowDotFn f = legacy_kernel<VnniOps>(type)) return f;
      return kquant_kernel<VnniOps>(type);
  }
}

}  // namespace polykv::cpu
