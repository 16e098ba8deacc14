// Reference trellis-coded turbo: Viterbi encoder and decoders (layout and math in turbo_trellis.h).
#include "quant/turbo_trellis.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "core/isa.h"
#include "core/fp16.h"
#include "quant/turbo.h"
#include "quant/turbo_internal.h"
#include "quant/turbo_trellis_internal.h"

namespace polykv::turbo::trellis {

namespace {

// Produced by tools/tcq_codebook.py BITS (generalized Lloyd iteration with the Viterbi encoder on
// 4000 random unit vectors of 128 dims scaled by sqrt(128), symmetrized each step, 25 iterations).
// Held-out MSE per coordinate, against the 2^bits-level Lloyd-Max quantizer of plain turbo:
//   2 bits: 0.085880 vs 0.116040;  3 bits: 0.023465 vs 0.033865;  4 bits: 0.006150 vs 0.009351.
constexpr double kCodebook2[8] = {-1.854814, -1.057199, -0.616284, -0.177389, 0.177389, 0.616284, 1.057199, 1.854814};
constexpr double kCodebook3[16] = {-2.483670, -1.801972, -1.364522, -1.046195, -0.787245, -0.541864,
                                   -0.329137, -0.099385, 0.099385,  0.329137,  0.541864,  0.787245,
                                   1.046195,  1.364522,  1.801972,  2.483670};
constexpr double kCodebook4[32] = {
    -3.016406, -2.418897, -2.032920, -1.738632, -1.498507, -1.300974, -1.133916, -0.980854,
    -0.846699, -0.717010, -0.599772, -0.479817, -0.374490, -0.259203, -0.159939, -0.048178,
    0.048178,  0.159939,  0.259203,  0.374490,  0.479817,  0.599772,  0.717010,  0.846699,
    0.980854,  1.133916,  1.300974,  1.498507,  1.738632,  2.032920,  2.418897,  3.016406};

}  // namespace

const double* codebook(int bits) {
  check(bits >= 2 && bits <= 4, "trellis turbo: bits must be 2, 3 or 4, got ", bits);
  return bits == 2 ? kCodebook2 : bits == 3 ? kCodebook3 : kCodebook4;
}

namespace {

constexpr int kStates = 8;

// Subset of window w, from the packed table (the same for encoder and decoders).
constexpr int subset(int w) { return int(kSubsetWord >> (2 * w)) & 3; }

struct Tables {
  float t[3][3][32];  // [bits - 2][group 32, 64, 128][level]
  Tables() {
    const int groups[3] = {32, 64, 128};
    for (int b = 2; b <= 4; ++b)
      for (int g = 0; g < 3; ++g)
        for (int k = 0; k < (2 << b); ++k) t[b - 2][g][k] =
              fp16_exact(float(codebook(b)[k] / std::sqrt(double(groups[g]))));  // f16-exact (turbo.h)
  }
};
const Tables& tables() {
  static const Tables t;
  return t;
}

size_t group_bytes(int bits, int n) { return 2 + size_t(n) * size_t(bits) / 8; }

void set_bit(uint8_t* p, int i) { p[i >> 3] |= uint8_t(1u << (i & 7)); }
int get_bit(const uint8_t* p, int i) { return (p[i >> 3] >> (i & 7)) & 1; }
// Index i of a w-bit LSB-first stream (w in 1..3), as turbo.h's streams.
void set_index(uint8_t* p, int w, int i, int j) {
  const int bit = w * i;
  p[bit >> 3] |= uint8_t(j << (bit & 7));
  if ((bit & 7) + w > 8) p[(bit >> 3) + 1] |= uint8_t(j >> (8 - (bit & 7)));
}
int get_index(const uint8_t* p, int w, int i) {
  const int bit = w * i;
  int v = p[bit >> 3] >> (bit & 7);
  if ((bit & 7) + w > 8) v |= p[(bit >> 3) + 1] << (8 - (bit & 7));
  return v & ((1 << w) - 1);
}

// Encodes one group: u[0..n) normalized rotated coordinates (unit norm), lv the group's levels.
// Writes t bits and j indices into rec (zeroed) and returns sum c_i^2 of the chosen levels.
double encode_group(int bits, const float* u, const float* lv, int n, uint8_t* rec) {
  const int per_subset = 1 << (bits - 1);
  constexpr float kInf = std::numeric_limits<float>::infinity();
  float cost[kStates], next[kStates];
  uint8_t from[128][kStates];  // [i][new state]: the dropped oldest bit t_{i-3} of the best predecessor
  uint8_t pick[128][kStates];  // [i][new state]: the index j chosen on that branch
  for (int s = 0; s < kStates; ++s) cost[s] = s == 0 ? 0.0f : kInf;
  for (int i = 0; i < n; ++i) {
    // Nearest level of each subset and its squared error (branch-free: the data is random).
    float err[4];
    int best_j[4];
    for (int s = 0; s < 4; ++s) {
      float e = kInf;
      int bj = 0;
      for (int j = 0; j < per_subset; ++j) {
        const float d = u[i] - lv[s + 4 * j], dd = d * d;
        bj = dd < e ? j : bj;
        e = dd < e ? dd : e;
      }
      err[s] = e, best_j[s] = bj;
    }
    // New state ns = (t_{i-2}, t_{i-1}, t_i) = w >> 1; its two predecessors differ in t_{i-3} = w & 1
    // (ties keep t_{i-3} = 0).
    for (int ns = 0; ns < kStates; ++ns) {
      const int w0 = (ns << 1) & 15, w1 = w0 | 1;
      const float c0 = cost[w0 & 7] + err[subset(w0)], c1 = cost[w1 & 7] + err[subset(w1)];
      const bool take1 = c1 < c0;
      next[ns] = take1 ? c1 : c0;
      from[i][ns] = uint8_t(take1);
      pick[i][ns] = uint8_t(best_j[subset(take1 ? w1 : w0)]);
    }
    std::memcpy(cost, next, sizeof cost);
  }
  int s = 0;
  for (int k = 1; k < kStates; ++k)
    if (cost[k] < cost[s]) s = k;
  uint8_t* tbits = rec + 2;
  uint8_t* jbits = tbits + n / 8;
  double c_sq[128];  // c_i² of the chosen levels (exact: a float squared fits a double)
  for (int i = n - 1; i >= 0; --i) {
    const int w = ((s << 1) | from[i][s]) & 15;
    const int j = pick[i][s];
    if (w >> 3) set_bit(tbits, i);
    set_index(jbits, bits - 1, i, j);
    const double c = lv[subset_of_window(w) + 4 * j];
    c_sq[i] = c * c;
    s = w & 7;
  }
  return turbo::detail::lane_tree_sum(c_sq, n, turbo::detail::LaneOrder::Blocked);
}

}  // namespace

const float* levels(int bits, int group) {
  codebook(bits);  // validates bits
  check(group == 32 || group == 64 || group == 128, "trellis turbo: group must be 32, 64 or 128, got ", group);
  return detail::level_table(bits, group);
}

const float* detail::level_table(int bits, int group) {
  return tables().t[bits - 2][group == 32 ? 0 : group == 64 ? 1 : 2];
}

size_t head_bytes(int bits, int head_dim) {
  codebook(bits);
  const int n = group_size(head_dim);
  return size_t(head_dim / n) * group_bytes(bits, n);
}

void quantize_head(int bits, const float* x, uint8_t* dst, int head_dim) {
  const int n = group_size(head_dim);
  const float* lv = levels(bits, n);  // validates bits
  detail::encode_groups(
      bits, x, dst, head_dim, [](float* u, int group) { rotate(u, group); },
      [&](const float* u, uint8_t* rec) { return encode_group(bits, u, lv, n, rec); });
}

void quantize_head_fast(int bits, const float* x, uint8_t* dst, int head_dim) {
  const QuantizeFn avx2 = bits >= 2 && bits <= 4 && isa_has_avx2(active_isa()) ? quantize_head_avx2_kernel() : nullptr;
  if (avx2 == nullptr) return quantize_head(bits, x, dst, head_dim);  // also the errors for bad bits / head_dim
  avx2(bits, x, dst, head_dim);
}

void decode_rotated(int bits, const uint8_t* src, float* y, int head_dim) {
  head_bytes(bits, head_dim);  // validates bits and head_dim
  const detail::Shape s = detail::shape(bits, head_dim);
  const float* lv = detail::level_table(bits, s.group);
  for (int g = 0; g < s.n_groups; ++g) {
    const detail::Record r = detail::record(src, s, g);
    int w = 0;
    for (int i = 0; i < s.group; ++i) {
      w = (w >> 1) | (get_bit(r.tbits, i) << 3);
      y[g * s.group + i] = r.norm * lv[subset(w) + 4 * get_index(r.jbits, bits - 1, i)];
    }
  }
}

void dequantize_head(int bits, const uint8_t* src, float* x, int head_dim) {
  decode_rotated(bits, src, x, head_dim);
  unrotate(x, head_dim);
}

}  // namespace polykv::turbo::trellis
