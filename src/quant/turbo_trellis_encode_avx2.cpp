// AVX2 encoder of trellis-coded turbo heads: the same bytes as the reference quantize_head
// (turbo_trellis.cpp; layout and math in turbo_trellis.h), for every input, NaN and infinities included.
//
// The reference runs the Viterbi one state at a time and keeps from / pick tables of every (step, state).
// Here the 8 states of one step are the 8 lanes of a vector, so a step is two permutes of the costs, two
// permutes of the step's branch errors, two adds, one compare (the survivor bits, one byte a step) and one
// min: the chain is permute -> add -> min, ~9 cycles a step instead of the reference's ~8 scalar
// add-compare-selects with their table stores. The operations are the reference's on the same operands:
//   c0 = cost[(ns << 1) & 7] + err[subset(w0)], c1 = cost[((ns << 1) | 1) & 7] + err[subset(w1)] (IEEE adds);
//   take1 = c1 < c0 (ordered: false for NaN); next = take1 ? c1 : c0, which is vminps(c1, c0) exactly
//   (vminps returns its first operand iff it is less than the second, else the second).
// The branch errors of 8 coordinates are computed at a time (the reference's loop over j, strict <: the
// first j wins ties) and transposed to one 4-float row per coordinate. The traceback walks the survivor bits
// to the best path's windows (scalar: one dependent state a step), then finds each coordinate's index in its
// window's subset 8 coordinates at a time, with the reference's comparison order, and packs the bit streams.
// Norms and sums use the reference's code.
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "core/cpu_features.h"
#include "core/fp16.h"
#include "quant/turbo.h"
#include "quant/turbo_internal.h"
#include "quant/turbo_trellis.h"
#include "quant/turbo_trellis_internal.h"

namespace polykv::turbo::trellis {
namespace {

constexpr int subset(int w) { return int(kSubsetWord >> (2 * w)) & 3; }

// Level k (0 <= k < 2^(kBits+1)) of the group's table in 8 lanes: 1, 2 or 4 8-entry tables, picked on k's bits 3
// and 4 (the decoder's lookup, turbo_trellis_avx2.cpp).
template <int kBits>
__m256 level_of(const __m256 (&table)[4], __m256i k) {
  __m256 v = _mm256_permutevar8x32_ps(table[0], k);
  if constexpr (kBits >= 3) {
    const __m256 hi = _mm256_permutevar8x32_ps(table[1], k);
    v = _mm256_blendv_ps(v, hi, _mm256_castsi256_ps(_mm256_slli_epi32(k, 28)));
  }
  if constexpr (kBits == 4) {
    const __m256 hi2 = _mm256_blendv_ps(_mm256_permutevar8x32_ps(table[2], k), _mm256_permutevar8x32_ps(table[3], k),
                                        _mm256_castsi256_ps(_mm256_slli_epi32(k, 28)));
    v = _mm256_blendv_ps(v, hi2, _mm256_castsi256_ps(_mm256_slli_epi32(k, 27)));
  }
  return v;
}

// turbo::rotate of one group (n = 32, 64, 128) with the reference's operations in its order: the signs, the
// butterfly stages h = 1, 2, 4, ... (x_j <- a + b, x_{j+h} <- a - b), then the scale. Stages h < 8 pair lanes of
// one vector (a + b and a - b from the vector and its lane-swapped copy; float adds commute exactly), h >= 8 pair
// whole vectors.
void rotate_group(float* x, int n) {
  const float* sign = turbo::detail::sign_table(n);
  __m256 v[16];
  const int nv = n / 8;
  for (int k = 0; k < nv; ++k) {
    __m256 a = _mm256_mul_ps(_mm256_load_ps(x + 8 * k), _mm256_loadu_ps(sign + 8 * k));
    __m256 sw = _mm256_permute_ps(a, _MM_SHUFFLE(2, 3, 0, 1));  // h = 1
    a = _mm256_blend_ps(_mm256_add_ps(a, sw), _mm256_sub_ps(sw, a), 0xAA);
    sw = _mm256_permute_ps(a, _MM_SHUFFLE(1, 0, 3, 2));  // h = 2
    a = _mm256_blend_ps(_mm256_add_ps(a, sw), _mm256_sub_ps(sw, a), 0xCC);
    sw = _mm256_permute2f128_ps(a, a, 0x01);  // h = 4
    v[k] = _mm256_blend_ps(_mm256_add_ps(a, sw), _mm256_sub_ps(sw, a), 0xF0);
  }
  for (int h = 1; h < nv; h *= 2)  // h vectors = 8 h values
    for (int i = 0; i < nv; i += 2 * h)
      for (int j = i; j < i + h; ++j) {
        const __m256 a = v[j], b = v[j + h];
        v[j] = _mm256_add_ps(a, b);
        v[j + h] = _mm256_sub_ps(a, b);
      }
  const __m256 scale = _mm256_set1_ps(float(1.0 / std::sqrt(double(n))));
  for (int k = 0; k < nv; ++k) _mm256_store_ps(x + 8 * k, _mm256_mul_ps(v[k], scale));
}

// err[i][s] = min_j (u_i - lv[s + 4 j])² for the n coordinates (n a multiple of 8).
template <int kPerSubset>
void branch_errors(const float* u, const float* lv, int n, float (*err)[4]) {
  const __m256 inf = _mm256_set1_ps(std::numeric_limits<float>::infinity());
  for (int i = 0; i < n; i += 8) {
    const __m256 x = _mm256_loadu_ps(u + i);
    __m256 e[4];
    for (int s = 0; s < 4; ++s) {
      e[s] = inf;
      for (int j = 0; j < kPerSubset; ++j) {
        const __m256 d = _mm256_sub_ps(x, _mm256_set1_ps(lv[s + 4 * j]));
        const __m256 dd = _mm256_mul_ps(d, d);
        e[s] = _mm256_blendv_ps(e[s], dd, _mm256_cmp_ps(dd, e[s], _CMP_LT_OQ));
      }
    }
    // 4 x 8 -> 8 x 4: row c of the result holds coordinate i + c's four subset errors.
    const __m256 t0 = _mm256_unpacklo_ps(e[0], e[1]), t1 = _mm256_unpackhi_ps(e[0], e[1]);
    const __m256 t2 = _mm256_unpacklo_ps(e[2], e[3]), t3 = _mm256_unpackhi_ps(e[2], e[3]);
    const __m256 r0 = _mm256_shuffle_ps(t0, t2, 0x44), r1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    const __m256 r2 = _mm256_shuffle_ps(t1, t3, 0x44), r3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    _mm_store_ps(err[i + 0], _mm256_castps256_ps128(r0));
    _mm_store_ps(err[i + 1], _mm256_castps256_ps128(r1));
    _mm_store_ps(err[i + 2], _mm256_castps256_ps128(r2));
    _mm_store_ps(err[i + 3], _mm256_castps256_ps128(r3));
    _mm_store_ps(err[i + 4], _mm256_extractf128_ps(r0, 1));
    _mm_store_ps(err[i + 5], _mm256_extractf128_ps(r1, 1));
    _mm_store_ps(err[i + 6], _mm256_extractf128_ps(r2, 1));
    _mm_store_ps(err[i + 7], _mm256_extractf128_ps(r3, 1));
  }
}

// The reference's encode_group: t bits and j indices of u[0..n) into rec (zeroed); returns sum c_i².
template <int kBits>
double encode_group(const float* u, const float* lv, int n, uint8_t* rec) {
  constexpr int kPerSubset = 1 << (kBits - 1);
  alignas(16) float err[128][4];
  branch_errors<kPerSubset>(u, lv, n, err);
  // Lane ns: predecessors (ns << 1) & 7 and ((ns << 1) | 1) & 7, windows w0 = (ns << 1) & 15, w1 = w0 | 1.
  const __m256i p0 = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6), p1 = _mm256_setr_epi32(1, 3, 5, 7, 1, 3, 5, 7);
  const __m256i s0 = _mm256_setr_epi32(subset(0), subset(2), subset(4), subset(6), subset(8), subset(10),
                                       subset(12), subset(14));
  const __m256i s1 = _mm256_setr_epi32(subset(1), subset(3), subset(5), subset(7), subset(9), subset(11),
                                       subset(13), subset(15));
  const float inf = std::numeric_limits<float>::infinity();
  __m256 cost = _mm256_setr_ps(0.0f, inf, inf, inf, inf, inf, inf, inf);
  uint8_t from[128];  // bit ns of from[i]: the survivor of state ns at step i dropped t_{i-3} = 1
  for (int i = 0; i < n; ++i) {
    const __m256 e = _mm256_castps128_ps256(_mm_load_ps(err[i]));  // lanes 4..7 are never indexed
    const __m256 c0 = _mm256_add_ps(_mm256_permutevar8x32_ps(cost, p0), _mm256_permutevar8x32_ps(e, s0));
    const __m256 c1 = _mm256_add_ps(_mm256_permutevar8x32_ps(cost, p1), _mm256_permutevar8x32_ps(e, s1));
    from[i] = uint8_t(_mm256_movemask_ps(_mm256_cmp_ps(c1, c0, _CMP_LT_OQ)));
    cost = _mm256_min_ps(c1, c0);
  }
  alignas(32) float final_cost[8];
  _mm256_store_ps(final_cost, cost);
  int s = 0;
  for (int k = 1; k < 8; ++k)
    if (final_cost[k] < final_cost[s]) s = k;
  // The best path's windows, last step first (the reference's traceback order of states).
  alignas(32) uint8_t window[128];
  for (int i = n - 1; i >= 0; --i) {
    const int w = ((s << 1) | ((from[i] >> s) & 1)) & 15;
    window[i] = uint8_t(w);
    s = w & 7;
  }
  // Per 8 coordinates: subset, the subset's nearest level (the reference's loop over j: strict <, the first j on
  // ties), the t bits, the j indices and c² in double.
  uint8_t* tbits = rec + 2;
  uint8_t* jbits = tbits + n / 8;
  alignas(32) double c_sq[128];
  __m256 table[4];
  for (int t = 0; t < (2 << kBits) / 8; ++t) table[t] = _mm256_loadu_ps(lv + 8 * t);
  const __m256i subsets = _mm256_set1_epi32(int(kSubsetWord)), three = _mm256_set1_epi32(3);
  const __m256 inf8 = _mm256_set1_ps(inf);
  for (int i = 0; i < n; i += 8) {
    uint64_t w8;
    std::memcpy(&w8, window + i, 8);
    const __m256i w = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(int64_t(w8)));
    const __m256i sub = _mm256_and_si256(_mm256_srlv_epi32(subsets, _mm256_slli_epi32(w, 1)), three);
    const __m256 x = _mm256_load_ps(u + i);
    __m256 e = inf8, c = level_of<kBits>(table, sub);
    __m256i j_best = _mm256_setzero_si256();
    for (int j = 0; j < kPerSubset; ++j) {
      const __m256 lvj = level_of<kBits>(table, _mm256_add_epi32(sub, _mm256_set1_epi32(4 * j)));
      const __m256 d = _mm256_sub_ps(x, lvj);
      const __m256 dd = _mm256_mul_ps(d, d);
      const __m256 m = _mm256_cmp_ps(dd, e, _CMP_LT_OQ);
      e = _mm256_blendv_ps(e, dd, m);
      c = _mm256_blendv_ps(c, lvj, m);
      j_best = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(j_best),
                                                    _mm256_castsi256_ps(_mm256_set1_epi32(j)), m));
    }
    tbits[i / 8] = uint8_t(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_slli_epi32(w, 28))));
    alignas(32) int32_t jv[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(jv), j_best);
    uint32_t packed = 0;  // 8 indices of kBits - 1 bits, LSB first: kBits - 1 whole bytes at bit (kBits - 1) i
    for (int l = 0; l < 8; ++l) packed |= uint32_t(jv[l]) << ((kBits - 1) * l);
    std::memcpy(jbits + (kBits - 1) * i / 8, &packed, size_t(kBits - 1));
    const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(c)), hi = _mm256_cvtps_pd(_mm256_extractf128_ps(c, 1));
    _mm256_store_pd(c_sq + i, _mm256_mul_pd(lo, lo));
    _mm256_store_pd(c_sq + i + 4, _mm256_mul_pd(hi, hi));
  }
  return turbo::detail::lane_tree_sum(c_sq, n, turbo::detail::LaneOrder::Blocked);
}

template <int kBits>
void quantize_groups(const float* x, uint8_t* dst, int head_dim) {
  const int n = group_size(head_dim);
  const float* lv = levels(kBits, n);
  detail::encode_groups(kBits, x, dst, head_dim, rotate_group,
                        [&](const float* u, uint8_t* rec) { return encode_group<kBits>(u, lv, n, rec); });
}

void quantize_head_avx2(int bits, const float* x, uint8_t* dst, int head_dim) {
  if (bits == 2) return quantize_groups<2>(x, dst, head_dim);
  if (bits == 3) return quantize_groups<3>(x, dst, head_dim);
  quantize_groups<4>(x, dst, head_dim);
}

}  // namespace

QuantizeFn quantize_head_avx2_kernel() { return cpu_features().has_avx2_set() ? quantize_head_avx2 : nullptr; }

}  // namespace polykv::turbo::trellis
