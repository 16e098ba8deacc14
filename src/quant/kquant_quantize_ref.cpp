// Reference quantization of the k-quant weight types: ggml's iterative scale searches, written out
// step by step. Bit-identical to ggml's quantize_row_*_ref when ggml is built without FMA
// contraction (q6_K checked on 2^20 values; q2_K..q5_K against ggml's bytes in
// tests/kquant_quantize_test.cpp); an FMA build of ggml can round its running sums differently and
// so pick a different scale now and then. Products are kept unfused here, as below.
//
// Bit-identity needs ggml's order of float operations everywhere: every sum is accumulated left to
// right over the values, `a*b*c` is (a*b)*c, `a*b - c*d` rounds both products first, and a division
// is never replaced by a multiplication with a reciprocal. The comments give the math; the code
// keeps that order.
#include "core/fp_contract_off.h"  // first: contraction off for this TU

#include "quant/kquant_quantize_ref.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "quant/kquant_scales.h"

namespace polykv {
namespace {

// Below this max |x| a group counts as all zero (ggml's GROUP_MAX_EPS).
constexpr float kGroupMaxEps = 1e-15f;

// Round half to even, as ggml's nearest_int: adding 1.5 * 2^23 moves the binary point of v to the
// end of the mantissa, so the float adder rounds (to even) and the low 23 bits hold round(v) + 2^22.
// Exact for |v| < 2^22 (there it equals std::nearbyint, which costs a library call without SSE4.1);
// beyond that ggml's result is garbage, and this gives the same garbage.
inline int nearest_int(float v) {
  const float shifted = v + 12582912.0f;
  return int(std::bit_cast<uint32_t>(shifted) & 0x007fffffu) - 0x00400000;
}

// ---------------------------------------------------------------------------------------------
// Scale searches of one group of values.

// Symmetric quantization of n values to integers in [-nmax, nmax) stored with +nmax in L, choosing
// the scale that maximizes the weighted fit (weights x^2, i.e. ggml's make_qx_quants with
// rmse_type 1): tries iscale = -(nmax + 0.1*k) / x_max for k = 0, -9..9 (x_max is the value of
// largest magnitude, with sign) and keeps the best least-squares scale sum(w*x*l) / sum(w*l*l).
// Returns that scale (0 for an all-zero group, whose L are all 0).
float best_symmetric_scale(const float* x, int n, int nmax, int8_t* L) {
  float max = 0.0f, amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    std::fill(L, L + n, int8_t(0));
    return 0.0f;
  }
  auto quant = [&](float iscale, int i) { return std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1); };
  // Weighted sums for one trial iscale: sumlx = sum(w*x*l), suml2 = sum(w*l*l), w = x^2.
  auto fit = [&](float iscale, float& sumlx, float& suml2) {
    sumlx = 0.0f;
    suml2 = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = quant(iscale, i);
      const float w = x[i] * x[i];
      const float wx = w * x[i];
      sumlx += wx * float(l);
      const float wl = w * float(l);
      suml2 += wl * float(l);
    }
  };
  float iscale = float(-nmax) / max;
  float sumlx, suml2;
  fit(iscale, sumlx, suml2);
  for (int i = 0; i < n; ++i) L[i] = int8_t(quant(iscale, i) + nmax);
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int step = -9; step <= 9; ++step) {
    if (step == 0) continue;
    iscale = -(float(nmax) + 0.1f * float(step)) / max;
    fit(iscale, sumlx, suml2);
    if (suml2 > 0.0f && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) L[i] = int8_t(quant(iscale, i) + nmax);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Symmetric quantization to integers in [-nmax, nmax) (stored with +nmax in L) refined one value at
// a time (ggml's make_q3_quants with do_rmse): start from iscale = -nmax / x_max, then for up to 5
// sweeps move each l[i] to the integer nearest x[i] / s_i, where s_i = sum(w*l*l) / sum(w*x*l)
// over the other values (w = x^2), if that raises the fit sum(w*x*l)^2 / sum(w*l*l). Returns the
// least-squares scale sum(w*x*l) / sum(w*l*l) of the final quants (0 for an all-zero group, L = 0).
float refined_symmetric_scale(const float* x, int n, int nmax, int8_t* L) {
  float max = 0.0f, amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    std::fill(L, L + n, int8_t(0));
    return 0.0f;
  }
  const float iscale = float(-nmax) / max;
  float sumlx = 0.0f, suml2 = 0.0f;  // sum(w*x*l), sum(w*l*l) of the current L
  for (int i = 0; i < n; ++i) {
    const int l = std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = int8_t(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * float(l);
    suml2 += w * float(l) * float(l);
  }
  for (int sweep = 0; sweep < 5; ++sweep) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * float(L[i]);  // the sums without value i
      if (!(slx > 0.0f)) continue;
      float sl2 = suml2 - w * float(L[i]) * float(L[i]);
      const int l = std::clamp(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
      if (l == L[i]) continue;
      slx += w * x[i] * float(l);
      sl2 += w * float(l) * float(l);
      if (sl2 > 0.0f && slx * slx * suml2 > sumlx * sumlx * sl2) {
        L[i] = int8_t(l);
        sumlx = slx;
        suml2 = sl2;
        ++n_changed;
      }
    }
    if (n_changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = int8_t(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// The trial grid of best_scale_and_min: iscale = (first + step*k + nmax) / (max - min), k = 0..n_steps.
struct ScaleGrid {
  float first, step;
  int n_steps;     // >= 1
  bool abs_error;  // the error is sum(w*|e|) (else sum(w*e^2))
};

// Asymmetric quantization x ~ scale * l - m of n values to l in [0, nmax] (written to L), with a
// min m >= 0 (ggml's make_qkx2_quants). Writes m to *m_out and returns the scale.
// Start: min = min(0, min x), max = max x, scale = (max - min) / nmax. Then for each k of the grid:
// quantize l = round(iscale_k * (x - min)) with iscale_k = (first + step*k + nmax) / (max - min),
// fit scale and min by weighted least squares (the min clamped to <= 0, refitting the scale alone
// then), and keep the trial if its weighted error is below the best so far. As in ggml, `min` in
// iscale_k and in the quantization is the best min so far: a winning trial moves it for the next.
// A group with max == min (all equal and <= 0, e.g. all zero) gets L = 0, scale 0, m = -min.
// aux: n bytes of scratch.
float best_scale_and_min(const float* x, const float* w, int n, int nmax, const ScaleGrid& grid, uint8_t* L,
                         uint8_t* aux, float* m_out) {
  float min = x[0], max = x[0];
  float sum_w = w[0];          // sum(w)
  float sum_x = sum_w * x[0];  // sum(w*x)
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0.0f) min = 0.0f;
  if (max == min) {
    std::fill(L, L + n, uint8_t(0));
    *m_out = -min;
    return 0.0f;
  }
  // Weighted error of x ~ scale * q + offset over the quants q.
  auto error = [&](float scale, float offset, const uint8_t* q) {
    float sum = 0.0f;
    for (int i = 0; i < n; ++i) {
      float e = scale * float(q[i]) + offset - x[i];
      e = grid.abs_error ? std::fabs(e) : e * e;
      sum += w[i] * e;
    }
    return sum;
  };
  auto quantize = [&](float iscale, uint8_t* q) {
    for (int i = 0; i < n; ++i) q[i] = uint8_t(std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax));
  };
  float iscale = float(nmax) / (max - min);
  float scale = 1.0f / iscale;
  quantize(iscale, L);
  float best_error = error(scale, min, L);
  for (int k = 0; k <= grid.n_steps; ++k) {
    iscale = (grid.first + grid.step * float(k) + float(nmax)) / (max - min);
    quantize(iscale, aux);
    float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;  // sum(w*l), sum(w*l*l), sum(w*l*x)
    for (int i = 0; i < n; ++i) {
      const float l = float(aux[i]);
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (!(det > 0.0f)) continue;
    float trial_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float trial_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (trial_min > 0.0f) {
      trial_min = 0.0f;
      trial_scale = sum_xl / sum_l2;
    }
    const float trial_error = error(trial_scale, trial_min, aux);
    if (trial_error < best_error) {
      std::copy(aux, aux + n, L);
      best_error = trial_error;
      scale = trial_scale;
      min = trial_min;
    }
  }
  *m_out = -min;
  return scale;
}

// ---------------------------------------------------------------------------------------------
// Packing (each the inverse of the matching unpacking in dequantize_ref.cpp / kquant_scales.h).

// q4_K/q5_K: 8 6-bit scales and mins into 12 bytes, as kquant_scale_min() reads them.
void pack_scale_min_6bit(const uint8_t scale[8], const uint8_t min[8], uint8_t out[kKScaleBytes]) {
  for (int j = 0; j < 4; ++j) {
    out[j] = uint8_t(scale[j] | ((scale[j + 4] >> 4) << 6));
    out[j + 4] = uint8_t(min[j] | ((min[j + 4] >> 4) << 6));
    out[j + 8] = uint8_t((scale[j + 4] & 0x0F) | ((min[j + 4] & 0x0F) << 4));
  }
}

// q2_K/q3_K: 256 2-bit values; value i is bits 2*((i%128)/32).. of qs[32*(i/128) + i%32].
void pack_two_bit(const uint8_t L[kQK_K], uint8_t qs[kQK_K / 4]) {
  std::memset(qs, 0, kQK_K / 4);
  for (int i = 0; i < kQK_K; ++i) qs[32 * (i / 128) + i % 32] |= uint8_t((L[i] & 3) << (2 * ((i % 128) / 32)));
}

// q4_K/q5_K: the low 4 bits of value 32*s + k go to qs[32*(s/2) + k], low nibble for even s.
void pack_k_nibbles(const uint8_t L[kQK_K], uint8_t qs[kQK_K / 2]) {
  std::memset(qs, 0, kQK_K / 2);
  for (int i = 0; i < kQK_K; ++i) {
    const int s = i / 32, k = i % 32;
    qs[32 * (s / 2) + k] |= uint8_t((L[i] & 0x0F) << (4 * (s % 2)));
  }
}

// ---------------------------------------------------------------------------------------------
// Block quantizers.

// q4_K / q5_K: 8 sub-blocks of 32 values, each fitted as x ~ scale * l - m (l in 0..nmax) by
// best_scale_and_min with weights av + |x| (av = rms of the sub-block). Scales and mins are then
// quantized to 6 bits against d = max_scale / 63 and dmin = max_min / 63 (stored fp16), and each
// value is re-quantized against its rounded pair: l = round((x + dmin*m) / (d*sc)), clamped to
// 0..nmax. A sub-block whose rounded d*sc is 0 keeps the quants of its search.
// Writes d, dmin, the packed scales and L[256] (0..nmax).
void quantize_scale_min_block(const float* x, int nmax, const ScaleGrid& grid, fp16_bits& d_out,
                              fp16_bits& dmin_out, uint8_t scales_out[kKScaleBytes], uint8_t L[kQK_K]) {
  constexpr int kSub = 32;
  float scale[kQK_K / kSub], min[kQK_K / kSub];
  float max_scale = 0.0f, max_min = 0.0f;  // scales and mins are >= 0
  for (int j = 0; j < kQK_K / kSub; ++j) {
    const float* xs = x + kSub * j;
    float sum_x2 = 0.0f;
    for (int i = 0; i < kSub; ++i) sum_x2 += xs[i] * xs[i];
    const float av = std::sqrt(sum_x2 / float(kSub));
    float w[kSub];
    for (int i = 0; i < kSub; ++i) w[i] = av + std::fabs(xs[i]);
    uint8_t aux[kSub];
    scale[j] = best_scale_and_min(xs, w, kSub, nmax, grid, L + kSub * j, aux, &min[j]);
    if (scale[j] > max_scale) max_scale = scale[j];
    if (min[j] > max_min) max_min = min[j];
  }
  const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
  uint8_t sc[kQK_K / kSub], mn[kQK_K / kSub];
  for (int j = 0; j < kQK_K / kSub; ++j) {
    // As ggml: the rounded value is taken modulo 256 before the clamp (no effect for scales >= 0).
    sc[j] = std::min<uint8_t>(63, uint8_t(nearest_int(inv_scale * scale[j])));
    mn[j] = std::min<uint8_t>(63, uint8_t(nearest_int(inv_min * min[j])));
  }
  pack_scale_min_6bit(sc, mn, scales_out);
  d_out = f32_to_fp16(max_scale / 63.0f);
  dmin_out = f32_to_fp16(max_min / 63.0f);
  for (int j = 0; j < kQK_K / kSub; ++j) {
    const ScaleMin sm = kquant_scale_min(j, scales_out);
    const float d = fp16_to_f32(d_out) * float(sm.scale);
    if (d == 0.0f) continue;
    const float dm = fp16_to_f32(dmin_out) * float(sm.min);
    for (int i = kSub * j; i < kSub * j + kSub; ++i) L[i] = uint8_t(std::clamp(nearest_int((x[i] + dm) / d), 0, nmax));
  }
}

void quantize_q4_K_block(const float* x, BlockQ4_K& b) {
  uint8_t L[kQK_K];
  quantize_scale_min_block(x, 15, ScaleGrid{-1.0f, 0.1f, 20, false}, b.d, b.dmin, b.scales, L);
  pack_k_nibbles(L, b.qs);
}

// q5_K: as q4_K with 5-bit quants; the fifth bit of value 32*s + k is bit s of qh[k].
void quantize_q5_K_block(const float* x, BlockQ5_K& b) {
  uint8_t L[kQK_K];
  quantize_scale_min_block(x, 31, ScaleGrid{-0.5f, 0.1f, 15, false}, b.d, b.dmin, b.scales, L);
  pack_k_nibbles(L, b.qs);
  std::memset(b.qh, 0, sizeof(b.qh));
  for (int i = 0; i < kQK_K; ++i) b.qh[i % 32] |= uint8_t(((L[i] >> 4) & 1) << (i / 32));
}

// q2_K: 16 groups of 16 values, each fitted as x ~ scale * l - m (l in 0..3) with weights |x| and
// absolute error. Scales and mins are quantized to 4 bits against d = max_scale / 15 and
// dmin = max_min / 15 (stored fp16; 0 when the max is 0), scale in the low and min in the high
// nibble of scales[g]; then every value is re-quantized against its rounded pair as in q4_K.
void quantize_q2_K_block(const float* x, BlockQ2_K& b) {
  constexpr int kGroup = 16;
  uint8_t L[kQK_K];
  float scale[kQK_K / kGroup], min[kQK_K / kGroup];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int g = 0; g < kQK_K / kGroup; ++g) {
    const float* xg = x + kGroup * g;
    float w[kGroup];
    for (int i = 0; i < kGroup; ++i) w[i] = std::fabs(xg[i]);
    uint8_t aux[kGroup];
    scale[g] = best_scale_and_min(xg, w, kGroup, 3, ScaleGrid{-0.5f, 0.1f, 15, true}, L + kGroup * g, aux, &min[g]);
    if (scale[g] > max_scale) max_scale = scale[g];
    if (min[g] > max_min) max_min = min[g];
  }
  // ggml stores the rounded 4-bit values without a clamp; they are in 0..15 because every scale
  // and min is in [0, max]. The casts keep ggml's bits even if one were not.
  std::memset(b.scales, 0, sizeof(b.scales));
  b.d = 0;
  b.dmin = 0;
  if (max_scale > 0.0f) {
    const float iscale = 15.0f / max_scale;
    for (int g = 0; g < kQK_K / kGroup; ++g) b.scales[g] = uint8_t(nearest_int(iscale * scale[g]));
    b.d = f32_to_fp16(max_scale / 15.0f);
  }
  if (max_min > 0.0f) {
    const float iscale = 15.0f / max_min;
    for (int g = 0; g < kQK_K / kGroup; ++g)
      b.scales[g] = uint8_t(b.scales[g] | (uint32_t(nearest_int(iscale * min[g])) << 4));
    b.dmin = f32_to_fp16(max_min / 15.0f);
  }
  for (int g = 0; g < kQK_K / kGroup; ++g) {
    const float d = fp16_to_f32(b.d) * float(b.scales[g] & 0x0F);
    if (d == 0.0f) continue;
    const float dm = fp16_to_f32(b.dmin) * float(b.scales[g] >> 4);
    for (int i = kGroup * g; i < kGroup * g + kGroup; ++i)
      L[i] = uint8_t(std::clamp(nearest_int((x[i] + dm) / d), 0, 3));
  }
  pack_two_bit(L, b.qs);
}

// q3_K: 16 groups of 16 values, each with its refined symmetric scale (quants -4..3); the group
// scales are quantized to 6 bits (-32..31, stored +32) against d = max_scale / -32 (max_scale the
// scale of largest magnitude, with sign; d stored fp16, 0 if max_scale is 0), and every value is
// re-quantized against its rounded group scale d * sc. A group whose d * sc is 0 keeps the quants of
// its search. Quants are stored +4 (0..7): low 2 bits in qs, bit 2 in hmask (value i: bit i/32 of
// hmask[i%32]).
void quantize_q3_K_block(const float* x, BlockQ3_K& b) {
  constexpr int kGroup = 16;
  int8_t L[kQK_K];  // 0..7
  float scale[kQK_K / kGroup];
  float max_scale = 0.0f, amax = 0.0f;
  for (int g = 0; g < kQK_K / kGroup; ++g) {
    scale[g] = refined_symmetric_scale(x + kGroup * g, kGroup, 4, L + kGroup * g);
    if (std::fabs(scale[g]) > amax) {
      amax = std::fabs(scale[g]);
      max_scale = scale[g];
    }
  }
  std::memset(b.scales, 0, sizeof(b.scales));
  b.d = 0;
  if (max_scale != 0.0f) {
    const float iscale = -32.0f / max_scale;
    for (int g = 0; g < kQK_K / kGroup; ++g) {
      const int raw = std::clamp(int(int8_t(nearest_int(iscale * scale[g]))), -32, 31) + 32;  // 0..63
      // Low 4 bits: low nibble of byte g (g < 8) or high nibble of byte g-8; high 2 bits: bits
      // 2*(g/4).. of byte 8 + g%4 (the layout q3k_scale() reads).
      b.scales[g % 8] |= uint8_t((raw & 0x0F) << (g < 8 ? 0 : 4));
      b.scales[8 + g % 4] |= uint8_t((raw >> 4) << (2 * (g / 4)));
    }
    b.d = f32_to_fp16(1.0f / iscale);
  }
  for (int g = 0; g < kQK_K / kGroup; ++g) {
    const float d = fp16_to_f32(b.d) * float(q3k_scale(g, b.scales));
    if (d == 0.0f) continue;
    for (int i = kGroup * g; i < kGroup * g + kGroup; ++i) L[i] = int8_t(std::clamp(nearest_int(x[i] / d), -4, 3) + 4);
  }
  std::memset(b.hmask, 0, sizeof(b.hmask));
  uint8_t low[kQK_K];
  for (int i = 0; i < kQK_K; ++i) {
    if (L[i] > 3) b.hmask[i % 32] |= uint8_t(1 << (i / 32));
    low[i] = uint8_t(L[i] & 3);
  }
  pack_two_bit(low, b.qs);
}

// q6_K: 16 groups of 16 values, each with its best 6-bit symmetric scale; the group scales are then
// quantized to int8 against the super-block scale d = max_scale / -128 (stored fp16), and every value
// is re-quantized against its rounded group scale d * scale[g]. A group whose rounded scale is 0 keeps
// the quants of its own search.
void quantize_q6_K_block(const float* x, BlockQ6_K& b) {
  int8_t L[kQK_K];  // quants + 32, 0..63
  float group_scale[kQK_K / 16];
  float max_scale = 0.0f, max_abs_scale = 0.0f;
  for (int g = 0; g < kQK_K / 16; ++g) {
    group_scale[g] = best_symmetric_scale(x + 16 * g, 16, 32, L + 16 * g);
    if (std::fabs(group_scale[g]) > max_abs_scale) {
      max_abs_scale = std::fabs(group_scale[g]);
      max_scale = group_scale[g];
    }
  }
  std::memset(&b, 0, sizeof(b));
  if (max_abs_scale < kGroupMaxEps) return;  // all zero: d = 0

  const float iscale = -128.0f / max_scale;
  b.d = f32_to_fp16(1.0f / iscale);
  for (int g = 0; g < kQK_K / 16; ++g) b.scales[g] = int8_t(std::min(127, nearest_int(iscale * group_scale[g])));
  for (int g = 0; g < kQK_K / 16; ++g) {
    const float d = fp16_to_f32(b.d) * float(b.scales[g]);
    if (d == 0.0f) continue;
    for (int i = 16 * g; i < 16 * g + 16; ++i) L[i] = int8_t(std::clamp(nearest_int(x[i] / d), -32, 31) + 32);
  }
  // Pack (inverse of dequantize_q6_K's layout): in half h, value 32*q + l goes to the low/high nibble
  // of ql[64*h + 32*(q%2) + l] and bits 2q..2q+1 of qh[32*h + l].
  for (int i = 0; i < kQK_K; ++i) {
    const int h = i / 128, q = (i % 128) / 32, l = i % 32;
    const int low = L[i] & 0x0F, high = L[i] >> 4;
    b.ql[64 * h + 32 * (q % 2) + l] |= uint8_t(q < 2 ? low : low << 4);
    b.qh[32 * h + l] |= uint8_t(high << (2 * q));
  }
}

// Applies one block function to each of the n / kQK_K blocks of a row.
template <typename Block>
void quantize_k_blocks(void (*one)(const float*, Block&), const float* x, Block* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i) one(x + i * kQK_K, y[i]);
}

}  // namespace

void quantize_row_q2_K_ref(const float* x, BlockQ2_K* y, int64_t n) { quantize_k_blocks(quantize_q2_K_block, x, y, n); }
void quantize_row_q3_K_ref(const float* x, BlockQ3_K* y, int64_t n) { quantize_k_blocks(quantize_q3_K_block, x, y, n); }
void quantize_row_q4_K_ref(const float* x, BlockQ4_K* y, int64_t n) { quantize_k_blocks(quantize_q4_K_block, x, y, n); }
void quantize_row_q5_K_ref(const float* x, BlockQ5_K* y, int64_t n) { quantize_k_blocks(quantize_q5_K_block, x, y, n); }
void quantize_row_q6_K_ref(const float* x, BlockQ6_K* y, int64_t n) { quantize_k_blocks(quantize_q6_K_block, x, y, n); }

}  // namespace polykv
