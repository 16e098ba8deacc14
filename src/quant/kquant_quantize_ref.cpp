// Reference quantization of the k-quant weight types: ggml's iterative scale searches, written out
// step by step. Bit-identical to ggml's quantize_row_*_ref when ggml is built without FMA
// contraction (checked on 2^20 values); an FMA build of ggml can round its running sums differently
// and so pick a different scale now and then. Products are kept unfused here, as below.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#elif defined(__clang__)
#pragma clang fp contract(off)
#endif

#include "quant/kquant_quantize_ref.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/fp16.h"

namespace polykv {
namespace {

// Below this max |x| a group counts as all zero (ggml's GROUP_MAX_EPS).
constexpr float kGroupMaxEps = 1e-15f;

// Round half to even, as ggml's nearest_int (valid for |v| < 2^22).
inline int nearest_int(float v) { return int(std::nearbyint(v)); }

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

}  // namespace

void quantize_row_q6_K_ref(const float* x, BlockQ6_K* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK_K; ++i) quantize_q6_K_block(x + i * kQK_K, y[i]);
}

}  // namespace polykv
