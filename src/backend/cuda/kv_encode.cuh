// The KV row encoders of the GPU's kv_store (backend/cuda/kv_store_cuda.cu), written so that the CPU
// runs the same code (tests/cuda_kv_encode_test.cpp): every KV type of kv/kv_type.h, producing the
// bytes of kv_type_ops(type).quantize_head.
//
// Work unit: one warp encodes one unit = one (row, head) for f32/f16/bf16/q8_0/q4_0, or one group of
// a (row, head) for turbo*/turbo*t (the group of 128, or of head_dim when it is 64 or 32; groups are
// coded independently, quant/turbo.h). An algorithm is a sequence of phases run through an executor:
//   ex.each(f): every lane l in 0..31 runs f(l), then the warp synchronizes (__syncwarp);
//   ex.one(f):  lane 0 runs f(), then the warp synchronizes.
// Lanes of one phase never read what another lane of the same phase writes (so any order of lanes
// gives the same result; the CPU test runs them in shuffled orders), and they communicate only
// through the warp's Scratch (shared memory on the device). The GPU executor is in kv_store_cuda.cu,
// the CPU one (HostExec) below. On the GPU the turbo and trellis groups run register forms instead (values
// in registers, shuffles; "register forms" below), which perform the same rounded operations; the array
// forms stay the CPU test's reference of the algorithm and the GPU's POLYKV_CUDA_KV_VITERBI=array / old.
//
// Bit-exactness with the CPU reference (finite inputs): every rounded operation of the reference is
// performed here once, on the same operands, in the same order (kv_encode_scalar.cuh's *_rn):
//   - the fast Walsh–Hadamard transform runs the reference's butterfly network (quant/turbo_rotation.cpp:
//     stage h pairs (j, j + h), a + b and a - b), only the pairs of one stage are spread over lanes;
//   - sums whose order matters (r² and ||c||² in double) are taken by one lane in the reference order;
//   - the trellis dynamic program computes each state's add-compare-select exactly as
//     quant/turbo_trellis.cpp (ties keep t = 0; first state wins the final argmin); a lane may
//     recompute a value another lane computes too (identical operands, identical result).
// So the bytes equal quantize_head's for every type (not merely within a tolerance).
//
// Constants (signs, levels, trellis subsets) are copied from the CPU's own tables by
// make_side_params (host) and travel with the kernel's parameters.
#pragma once
#include <cstddef>
#include <cstdint>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/kv_encode_scalar.cuh"
#include "core/error.h"
#include "kv/kv_type.h"
#include "quant/turbo.h"
#include "quant/turbo_internal.h"
#include "quant/turbo_trellis.h"

#ifndef __CUDACC__
#include <numeric>
#include <random>
#endif

// The warp forms (registers and shuffles: viterbi_warp, the register forms of the turbo encoders) are
// device code; tests/cuda/kv_encode_warp_emulation_test.cpp also compiles them for the CPU, a warp of
// fibers with emulated shuffles (POLYKV_KV_WARP_EMULATION).
#if defined(__CUDA_ARCH__) || defined(POLYKV_KV_WARP_EMULATION)
#define POLYKV_KV_WARP_FORMS 1
#endif

namespace polykv::cuda::enc {

enum class Codec : int { F32, F16, BF16, Q8_0, Q4_0, Turbo, Trellis };

// Which encoder kv_store runs on the GPU (POLYKV_CUDA_KV_VITERBI; every form writes the same bytes):
//   Registers        the register forms with the radix-4 Viterbi (the default);
//   RegistersRadix2  the register forms with the one-step Viterbi (=radix2);
//   Array            the array forms, the encoder before 2026-12-02's sixth session (=array);
//   Legacy           the array forms as before 2026-12-02 (=old): butterfly pair indices by integer division,
//                    and the Viterbi fills from / pick of every (step, state) for the traceback to read.
// The CPU test's HostExec runs the array forms whatever the form, Legacy with its from / pick tables.
enum class EncoderForm : int { Registers, RegistersRadix2, Array, Legacy };

// The constants of one turbo group size and bit width (copied from quant/'s tables).
struct TurboTables {
  float sign[128];       // [n] the diagonal of S (+1 / -1), turbo::detail::sign_table(n)
  uint32_t sign_neg[4];  // bit i % 32 of word i / 32: sign[i] is -1 (the same table as bits: lanes read
                         // one word all together instead of 32 different floats of parameter space)
  float lv[32];          // turbo: [2^bits] levels(bits, n); trellis: [2^(bits+1)] trellis::levels(bits, n)
  float mid[16];         // turbo: [2^bits - 1] decision boundaries 0.5f * (lv[k] + lv[k + 1])
  float scale;           // float(1 / sqrt(n)): the normalization of the WHT
  uint32_t subset_word;  // trellis: subset of window w = (subset_word >> 2w) & 3 (trellis::kSubsetWord)
  EncoderForm form;
};

POLYKV_KV_DEV bool is_legacy(const TurboTables& t) { return t.form == EncoderForm::Legacy; }
POLYKV_KV_DEV bool is_register_form(const TurboTables& t) {
  return t.form == EncoderForm::Registers || t.form == EncoderForm::RegistersRadix2;
}

// How the rows of one side (K or V) of a layer are encoded.
struct SideParams {
  Codec codec = Codec::F32;
  int bits = 0;         // turbo / trellis: 2, 3, 4
  int head_dim = 0;
  int unit_values = 0;  // values per unit: the turbo group n (32, 64, 128), else head_dim
  int units = 0;        // units per (row, head): head_dim / n for turbo, else 1
  uint32_t head_bytes = 0, unit_bytes = 0;  // kv_head_bytes; bytes of one unit (a group record)
  TurboTables tab;
};

// One warp's working memory (shared memory on the device): about 6.8 KB.
struct Scratch {
  double r2, c2;           // ||x_g||² and ||c||², double as the reference
  double c_sq[128];        // trellis: c_i² of the chosen levels
  double part[32];         // the 32 partial sums of a LaneOrder sum (quant/turbo_internal.h)
  float y[128];            // [n] the group, rotated in place; trellis: then the unit coordinates u
  alignas(16) float err[128][4];  // trellis: [i][subset] squared error of the subset's nearest level
  float cost[2][8];        // trellis: path costs per state, double-buffered by step parity
  uint8_t idx[128];        // turbo: level index; trellis: j_i
  uint8_t tb[128];         // trellis: t_i
  alignas(4) uint8_t bj[128][4];  // trellis: [i][subset] index j of that nearest level
  uint8_t from[128][8];    // trellis, legacy only: [i][new state] t_{i-3} of the best predecessor
  uint8_t pick[128][8];    // trellis, legacy only: [i][new state] j on that branch
  uint32_t from_bits[4][8];  // trellis: [step / 32][new state] bit step % 32 = t_{i-3} of the best predecessor
  uint8_t chunk_map[32][8];  // trellis traceback: [lane][state after its steps] state before them
  uint8_t chunk_end[32];     // trellis traceback: [lane] the state after its steps on the best path
};

// ---- sums in the reference's order (quant/turbo_internal.h, lane_tree_sum) ----

// The tree over the 32 partial sums p[0..32): p_l = p_l + p_{l+h}, h = 16 ... 1; returns p_0.
POLYKV_KV_DEV double tree_sum32(double* p) {
  for (int h = 16; h >= 1; h /= 2)
    for (int l = 0; l < h; ++l) p[l] = dadd_rn(p[l], p[l + h]);
  return p[0];
}

// Lane l's partial sum of v[0..n) in the Strided (l, l + 32, ...) or Blocked (l m .. l m + m - 1,
// m = n / 32) order of lane_tree_sum.
template <class V>
POLYKV_KV_DEV double lane_partial(int l, int n, bool strided, V&& v) {
  const int m = n / 32, first = strided ? l : l * m, step = strided ? 32 : 1;
  double p = v(first);
  for (int k = 1; k < m; ++k) p = dadd_rn(p, v(first + k * step));
  return p;
}

// ---- turbo groups ----

// y = S·x_g and r2 = ||x_g||² (double, summed in index order as the reference; squares of ±x are
// equal, so summing S·x is the same). Returns nothing: sh.y and sh.r2 hold the results.
template <class Exec>
POLYKV_KV_DEV void load_signed_and_norm(Exec& ex, Scratch& sh, const TurboTables& t, const float* x, int n) {
  ex.each([&](int l) {
    for (int i = l; i < n; i += 32) {
      const float sign = (t.sign_neg[i >> 5] >> (i & 31)) & 1u ? -1.0f : 1.0f;  // = t.sign[i]
      sh.y[i] = mul_rn(x[i], sign);
    }
  });
  ex.each([&](int l) {
    sh.part[l] = lane_partial(l, n, true, [&](int i) { return dmul_rn(double(sh.y[i]), double(sh.y[i])); });
  });
  ex.one([&] { sh.r2 = tree_sum32(sh.part); });
}

// sh.y <- H_unnormalized · sh.y: the reference's butterflies, stage h = 1, 2, ..., n/2; the n/2 pairs
// of a stage are disjoint, so lanes may take them in any order. The 1/sqrt(n) factor is applied by
// the caller (one rounded multiply per value, as the reference).
// Pair p of stage h (a power of two) is (j, j + h), j = (p / h) * 2h + p % h: with masks, not an
// integer division by a variable (8.7% of a turbo3t V unit's instructions on an H200, 2026-12-01g).
template <class Exec>
POLYKV_KV_DEV void butterflies(Exec& ex, Scratch& sh, int n, bool legacy) {
  for (int h = 1; h < n; h *= 2) {
    ex.each([&](int l) {
      for (int p = l; p < n / 2; p += 32) {
        const int j = legacy ? (p / h) * 2 * h + p % h : ((p & ~(h - 1)) << 1) | (p & (h - 1));
        const float a = sh.y[j], b = sh.y[j + h];
        sh.y[j] = add_rn(a, b);
        sh.y[j + h] = sub_rn(a, b);
      }
    });
  }
}

// Writes the whole record as zeros (an all-zero group: r' = 0, indices 0).
template <class Exec>
POLYKV_KV_DEV void zero_record(Exec& ex, uint8_t* rec, int bytes) {
  ex.each([&](int l) {
    for (int k = l; k < bytes; k += 32) rec[k] = 0;
  });
}

#if defined(POLYKV_KV_WARP_FORMS)
__device__ inline void encode_turbo_group_warp(int lane, Scratch& sh, const TurboTables& t, int bits, int n,
                                               const float* x, uint8_t* rec);  // below, with the register forms
#endif

// quant/turbo_quantize.cpp's quantize_head for one group of n values: x[0..n) -> rec (2 + n*bits/8).
template <class Exec>
POLYKV_KV_DEV void encode_turbo_group(Exec& ex, Scratch& sh, const TurboTables& t, int bits, int n,
                                      const float* x, uint8_t* rec) {
#if defined(POLYKV_KV_WARP_FORMS)
  if constexpr (Exec::kWarpShuffles) {
    if (is_register_form(t)) return encode_turbo_group_warp(ex.lane, sh, t, bits, n, x, rec);
  }
#endif
  const int index_bytes = n * bits / 8;
  load_signed_and_norm(ex, sh, t, x, n);
  const double r2 = sh.r2;
  if (r2 == 0) return zero_record(ex, rec, 2 + index_bytes);
  butterflies(ex, sh, n, is_legacy(t));
  const double r = dsqrt_rn(r2);
  const float inv_r = d2f_rn(ddiv_rn(1.0, r));
  const int n_mid = (1 << bits) - 1;
  ex.each([&](int l) {
    for (int i = l; i < n; i += 32) {
      const float u = mul_rn(mul_rn(sh.y[i], t.scale), inv_r);  // rotated, then / r: two roundings
      // The reference's "while (u > mid[idx]) ++idx" (nearest level, ties go down) counts the
      // boundaries below u, as mid ascends; counting keeps the lanes' table reads uniform.
      int idx = 0;
      for (int k = 0; k < n_mid; ++k) idx += u > t.mid[k] ? 1 : 0;
      sh.idx[i] = uint8_t(idx);
    }
  });
  ex.each([&](int l) {
    sh.part[l] = lane_partial(l, n, true, [&](int i) {
      const double c = t.lv[sh.idx[i]];
      return dmul_rn(c, c);
    });
  });
  ex.one([&] { sh.c2 = tree_sum32(sh.part); });
  const float norm = d2f_rn(ddiv_rn(r, dsqrt_rn(sh.c2)));  // r' = r / ||c||
  ex.each([&](int l) {
    if (l == 0) store_u16(rec, half_bits(norm));
    for (int k = l; k < index_bytes; k += 32) rec[2 + k] = stream_byte(sh.idx, bits, n, k);
  });
}

// ---- trellis-coded turbo groups (quant/turbo_trellis.cpp) ----

POLYKV_KV_DEV int subset_of(uint32_t word, int w) { return int(word >> (2 * w)) & 3; }

// The reference's add-compare-select of state ns at one step: its predecessors are the states
// w0 & 7 and w1 & 7 (costs c_w0, c_w1) of the windows w0 = (ns << 1) & 15, w1 = w0 | 1; err / bj are
// the step's [subset] branch errors and indices. Ties keep t_{i-3} = 0 (take1 false).
POLYKV_KV_DEV void acs(float c_w0, float c_w1, const float* err, const uint8_t* bj, int ns, uint32_t word,
                       float& cost, int& take1, int& pick) {
  const int w0 = (ns << 1) & 15, w1 = w0 | 1;
  const int s0 = subset_of(word, w0), s1 = subset_of(word, w1);
  const float c0 = add_rn(c_w0, err[s0]), c1 = add_rn(c_w1, err[s1]);
  take1 = c1 < c0 ? 1 : 0;
  cost = take1 ? c1 : c0;
  pick = bj[take1 ? s1 : s0];
}

// Viterbi over 8 states (t_{i-2}, t_{i-1}, t_i) from state 0, one step at a time: the cost of state
// ns after step i is acs(cost of (ns << 1) & 7, cost of ((ns << 1) | 1) & 7) over step i's branch
// errors, and bit i % 32 of from_bits[i / 32][ns] records its survivor's t_{i-3} (its index j is
// looked up by the traceback, for the best path's states only: bj[i][subset of the window]).
// Afterwards sh.cost[(n >> 1) & 1] holds the final costs (the slot the traceback reads).
//
// On the GPU (an executor whose kWarpShuffles is true) lane l keeps the cost of state l & 7 in a
// register and fetches its predecessors' with shuffles (by default two steps per round: viterbi_warp_radix4;
// one step is two shuffles and an add-compare-select), with no shared-memory round trip or warp barrier in the 128-step chain (that
// chain in shared memory made kv_store ~25 us per layer and decode step for turbo3t on an H200).
// The chain itself holds no store (2026-12-01c): the survivors' t_{i-3} bits collect in a register
// word per 32 steps (stored once per word), so no step's loads of err wait behind the previous step's
// stores (in-order issue). Since 2026-12-02 nothing follows the chain: the picks of all 8 x n
// (step, state) pairs that the kernel looked up afterwards (10.7% of a turbo3t V unit's instructions)
// are looked up by the traceback for the n steps of the best path only. Same operands, same
// rounding, same decisions: the same bytes.
// Elsewhere (the CPU test's HostExec) the same steps run over an array, lane by lane in the
// executor's order.
#if defined(POLYKV_KV_WARP_FORMS)
constexpr unsigned kWarpAll = 0xffffffffu;

// Two steps per round (radix 4, 2026-12-02; the default): lane ns fetches the costs of the four states
// two steps back, q(t, u) = ((ns << 2) | (t << 1) | u) & 7, with four independent shuffles, computes the
// add-compare-selects of its two intermediate states m_t = ((ns << 1) | t) & 7 at the even step (the
// reference's operands: costs of step i - 1 and step i's errors) and then its own at the odd step from
// them. The chain is one shuffle round and two add-compare-selects per two steps instead of two of
// each: the same values and decisions, so the same bytes. Bit i % 32 of state m's word: odd i from
// lane m, even i from lane m >> 1 (ns < 4 owns intermediates 2 ns and 2 ns + 1), merged per word.
// The surviving cost is min(a0, a1) (FMNMX), not a select on the comparison that records the bit, so the chain
// does not wait for that comparison's predicate (call M7: the store 11.46 -> 11.23 us). The same value: costs are sums of squares from
// +0 (never -0), equal costs have equal bits, and a step's costs are all NaN or none (a NaN coordinate makes
// every branch error of its step NaN), where min and the select agree too.
__device__ inline float keep_min(float a0, float a1) {
#if defined(__CUDA_ARCH__)
  return fminf(a0, a1);
#else
  return std::fmin(a0, a1);
#endif
}

__device__ inline float viterbi_warp_radix4(int lane, Scratch& sh, const TurboTables& t, int n) {
  const int ns = lane & 7;
  int q[2][2], sm[2][2];  // [t][u]: the state two steps back and the subset of intermediate m_t's window
POLYKV_KV_UNROLL
  for (int tt = 0; tt < 2; ++tt)
POLYKV_KV_UNROLL
    for (int u = 0; u < 2; ++u) {
      const int m = ((ns << 1) | tt) & 7, w = ((m << 1) & 15) | u;
      q[tt][u] = w & 7;
      sm[tt][u] = subset_of(t.subset_word, w);
    }
  const int w0 = (ns << 1) & 15, w1 = w0 | 1;
  const int s0 = subset_of(t.subset_word, w0), s1 = subset_of(t.subset_word, w1);
  float cost = ns == 0 ? 0.0f : inf_f();
  for (int i0 = 0; i0 < n; i0 += 32) {  // n is a multiple of 32
    uint32_t odd = 0, even0 = 0, even1 = 0;  // bits k: take1 of ns at odd steps, of m_0 / m_1 at even ones
POLYKV_KV_UNROLL
    for (int k = 0; k < 32; k += 2) {
      const float* ea = sh.err[i0 + k];
      const float* eb = sh.err[i0 + k + 1];
      const float e00 = ea[sm[0][0]], e01 = ea[sm[0][1]], e10 = ea[sm[1][0]], e11 = ea[sm[1][1]];
      const float f0 = eb[s0], f1 = eb[s1];
      const float c00 = __shfl_sync(kWarpAll, cost, q[0][0]), c01 = __shfl_sync(kWarpAll, cost, q[0][1]);
      const float c10 = __shfl_sync(kWarpAll, cost, q[1][0]), c11 = __shfl_sync(kWarpAll, cost, q[1][1]);
      const float a00 = add_rn(c00, e00), a01 = add_rn(c01, e01), a10 = add_rn(c10, e10), a11 = add_rn(c11, e11);
      const bool t0 = a01 < a00, t1 = a11 < a10;  // ties keep t = 0
      const float m0 = keep_min(a00, a01), m1 = keep_min(a10, a11);
      const float b0 = add_rn(m0, f0), b1 = add_rn(m1, f1);
      const bool take1 = b1 < b0;
      cost = keep_min(b0, b1);
      even0 |= uint32_t(t0) << k;
      even1 |= uint32_t(t1) << k;
      odd |= uint32_t(take1) << (k + 1);
    }
    const uint32_t e0 = __shfl_sync(kWarpAll, even0, ns >> 1), e1 = __shfl_sync(kWarpAll, even1, ns >> 1);
    if (lane < 8) sh.from_bits[i0 >> 5][ns] = odd | ((ns & 1) ? e1 : e0);
  }
  if (lane < 8) sh.cost[(n >> 1) & 1][ns] = cost;
  __syncwarp();
  return cost;
}

// Returns the final cost of state lane & 7.
__device__ inline float viterbi_warp(int lane, Scratch& sh, const TurboTables& t, int n) {
  if (t.form == EncoderForm::Registers) return viterbi_warp_radix4(lane, sh, t, n);
  const int ns = lane & 7;
  const int p0 = (ns << 1) & 7, p1 = ((ns << 1) | 1) & 7;
  const int w0 = (ns << 1) & 15, w1 = w0 | 1;
  const int s0 = subset_of(t.subset_word, w0), s1 = subset_of(t.subset_word, w1);
  float cost = ns == 0 ? 0.0f : inf_f();
  for (int i0 = 0; i0 < n; i0 += 32) {  // n is a multiple of 32
    uint32_t word = 0;  // bit k: take1 of step i0 + k
POLYKV_KV_UNROLL
    for (int k = 0; k < 32; ++k) {
      const float e0 = sh.err[i0 + k][s0], e1 = sh.err[i0 + k][s1];  // independent of the chain
      const float c0 = __shfl_sync(0xffffffffu, cost, p0), c1 = __shfl_sync(0xffffffffu, cost, p1);
      // acs(): c0 + err[s0] against c1 + err[s1], ties keep t = 0.
      const float a0 = add_rn(c0, e0), a1 = add_rn(c1, e1);
      const bool take1 = a1 < a0;
      cost = take1 ? a1 : a0;
      word |= uint32_t(take1) << k;
    }
    if (lane < 8) sh.from_bits[i0 >> 5][ns] = word;
  }
  if (lane < 8) sh.cost[(n >> 1) & 1][ns] = cost;
  __syncwarp();
  if (!is_legacy(t)) return cost;  // the traceback reads from_bits and looks up the path's picks itself
  // Legacy: from / pick of every (step, state), 8 * n entries over the 32 lanes.
  for (int e = lane; e < 8 * n; e += 32) {
    const int i = e >> 3, st = e & 7;
    const int take1 = int((sh.from_bits[i >> 5][st] >> (i & 31)) & 1u);
    const int w = ((st << 1) & 15) | take1;
    sh.from[i][st] = uint8_t(take1);
    sh.pick[i][st] = sh.bj[i][subset_of(t.subset_word, w)];
  }
  __syncwarp();
  return cost;
}
#endif

template <class Exec>
POLYKV_KV_DEV void viterbi(Exec& ex, Scratch& sh, const TurboTables& t, int n) {
#if defined(POLYKV_KV_WARP_FORMS)
  if constexpr (Exec::kWarpShuffles) {
    viterbi_warp(ex.lane, sh, t, n);
    return;
  }
#endif
  float* cost = sh.cost[0];  // [8] after the steps so far (cost[1]: the next step's)
  ex.each([&](int l) {
    if (l < 8) {
      cost[l] = l == 0 ? 0.0f : inf_f();
      for (int w = 0; w < 4; ++w) sh.from_bits[w][l] = 0;
    }
  });
  for (int i = 0; i < n; ++i) {
    float* next = sh.cost[(i + 1) & 1];
    const float* prev = sh.cost[i & 1];
    ex.each([&](int ns) {
      if (ns >= 8) return;
      float c;
      int take1, pick;
      acs(prev[(ns << 1) & 7], prev[((ns << 1) | 1) & 7], sh.err[i], sh.bj[i], ns, t.subset_word, c, take1, pick);
      next[ns] = c;
      sh.from[i][ns] = uint8_t(take1);
      sh.pick[i][ns] = uint8_t(pick);
      sh.from_bits[i >> 5][ns] |= uint32_t(take1) << (i & 31);
    });
  }
  // n is even: the final costs are in sh.cost[0]; the traceback reads sh.cost[(n >> 1) & 1].
  if (((n >> 1) & 1) != 0) {
    ex.each([&](int l) {
      if (l < 8) sh.cost[1][l] = sh.cost[0][l];
    });
  }
}

// ---- register forms of the turbo and trellis encoders (GPU; the default) ----
//
// The array forms above keep a group in the warp's shared memory and pass it between phases with warp
// barriers; lane 0 alone took the sums and chained the traceback's 32 chunk maps. A decode step's
// store is one warp per group, so its time is that warp's latency (kv_store of one q8_0/turbo3t row:
// ~14 us on an H200, 6 cycles per instruction). Here lane l keeps the group's values i = l + 32 k
// (k < n / 32) in registers from the load to the branch metrics: the butterflies of stages h < 32 are
// shuffles (h = 32, 64 stay in the lane), r² and ||c||² are LaneOrder trees of shuffles, the traceback's
// chunk maps are composed by a suffix scan of shuffles. Every rounded operation is the array form's, on
// the same operands, in the same order: the same bytes (tests/cuda/kv_store_cuda_test.cpp compares
// both with quantize_head; POLYKV_CUDA_KV_VITERBI=array / old run the array forms on the GPU).
#if defined(POLYKV_KV_WARP_FORMS)
// The LaneOrder tree of the lanes' partial sums p (every lane gets the sum): lane l adds lane l ^ h's,
// h = 16 ... 1, which is p_l + p_{l+h} for l < h and the same value (adds commute) for the others.
__device__ inline double warp_tree_sum(double p) {
POLYKV_KV_UNROLL
  for (int h = 16; h >= 1; h /= 2) p = dadd_rn(p, __shfl_xor_sync(kWarpAll, p, h));
  return p;
}

// The group size n = 32 K is a template parameter of the register forms (K = 1, 2, 4), and so is the trellis
// subset size: with a run-time K every guard below was a branch (21 of a unit's ~315 instructions in one block,
// call M2), and the warp is latency-bound.
// v[k] = S x at i = lane + 32 k for k < K = n / 32 (0 beyond); returns r² (every lane).
template <int K>
__device__ inline double load_signed_warp(int lane, const TurboTables& t, const float* x, float (&v)[4]) {
  double p = 0;
POLYKV_KV_UNROLL
  for (int k = 0; k < 4; ++k) {
    v[k] = 0.0f;
    if (k < K) {
      v[k] = mul_rn(x[lane + 32 * k], (t.sign_neg[k] >> lane) & 1u ? -1.0f : 1.0f);  // = t.sign[i]
      const double sq = dmul_rn(double(v[k]), double(v[k]));
      p = k == 0 ? sq : dadd_rn(p, sq);
    }
  }
  return warp_tree_sum(p);
}

// The reference's butterflies (stage h pairs (j, j + h): a + b, a - b), h = 1, 2, ..., n / 2.
template <int K>
__device__ inline void butterflies_warp(int lane, float (&v)[4]) {
  constexpr int n = 32 * K;
POLYKV_KV_UNROLL
  for (int h = 1; h < 32; h *= 2) {
    const bool upper = (lane & h) != 0;  // this lane holds j + h: a is the partner's value
POLYKV_KV_UNROLL
    for (int k = 0; k < 4; ++k) {
      if (k < K) {
        const float o = __shfl_xor_sync(kWarpAll, v[k], h);
        v[k] = upper ? sub_rn(o, v[k]) : add_rn(v[k], o);
      }
    }
  }
  if constexpr (n >= 64) {  // h = 32: values k and k + 1 of the lane, k even
POLYKV_KV_UNROLL
    for (int k = 0; k < 4; k += 2) {
      if (k + 1 < K) {
        const float a = v[k], b = v[k + 1];
        v[k] = add_rn(a, b);
        v[k + 1] = sub_rn(a, b);
      }
    }
  }
  if constexpr (n >= 128) {  // h = 64: values k and k + 2
POLYKV_KV_UNROLL
    for (int k = 0; k < 2; ++k) {
      const float a = v[k], b = v[k + 2];
      v[k] = add_rn(a, b);
      v[k + 2] = sub_rn(a, b);
    }
  }
}

__device__ inline void zero_record_warp(int lane, uint8_t* rec, int bytes) {
  for (int k = lane; k < bytes; k += 32) rec[k] = 0;
}

template <int K>
__device__ inline void encode_turbo_group_warp_k(int lane, Scratch& sh, const TurboTables& t, int bits,
                                                 const float* x, uint8_t* rec) {
  constexpr int n = 32 * K;
  const int index_bytes = n * bits / 8;
  float v[4];
  const double r2 = load_signed_warp<K>(lane, t, x, v);
  if (r2 == 0) return zero_record_warp(lane, rec, 2 + index_bytes);
  // r and 1 / r first: their double square root and division run under the butterflies' shuffles.
  const double r = dsqrt_rn(r2);
  const float inv_r = d2f_rn(ddiv_rn(1.0, r));
  butterflies_warp<K>(lane, v);
  const int n_mid = (1 << bits) - 1;
  double p = 0;
POLYKV_KV_UNROLL
  for (int k = 0; k < 4; ++k) {
    if (k < K) {
      const float u = mul_rn(mul_rn(v[k], t.scale), inv_r);
      int idx = 0;
      for (int m = 0; m < n_mid; ++m) idx += u > t.mid[m] ? 1 : 0;
      sh.idx[lane + 32 * k] = uint8_t(idx);
      const double c = t.lv[idx];
      const double sq = dmul_rn(c, c);
      p = k == 0 ? sq : dadd_rn(p, sq);
    }
  }
  const double c2 = warp_tree_sum(p);
  __syncwarp();  // sh.idx
  for (int k = lane; k < index_bytes; k += 32) rec[2 + k] = stream_byte(sh.idx, bits, n, k);
  const float norm = d2f_rn(ddiv_rn(r, dsqrt_rn(c2)));
  if (lane == 0) store_u16(rec, half_bits(norm));
}

__device__ inline void encode_turbo_group_warp(int lane, Scratch& sh, const TurboTables& t, int bits, int n,
                                               const float* x, uint8_t* rec) {
  if (n == 128) return encode_turbo_group_warp_k<4>(lane, sh, t, bits, x, rec);
  if (n == 64) return encode_turbo_group_warp_k<2>(lane, sh, t, bits, x, rec);
  return encode_turbo_group_warp_k<1>(lane, sh, t, bits, x, rec);
}

// Map composition for the traceback: maps are 8 states x 3 bits; (a o b)(s) = a(b(s)).
__device__ inline uint32_t compose_maps(uint32_t a, uint32_t b) {
  uint32_t r = 0;
POLYKV_KV_UNROLL
  for (int e = 0; e < 8; ++e) r |= ((a >> (3 * ((b >> (3 * e)) & 7u))) & 7u) << (3 * e);
  return r;
}

// The nearest level of each subset (first j on ties) for u, its squared error e4[s] and index (byte s of bj4);
// PS levels per subset.
template <int PS>
__device__ inline void branch_metrics(const TurboTables& t, float u, float (&e4)[4], uint32_t& bj4) {
  bj4 = 0;
POLYKV_KV_UNROLL
  for (int s = 0; s < 4; ++s) {
    float e = inf_f();
    int bj = 0;
POLYKV_KV_UNROLL
    for (int j = 0; j < PS; ++j) {
      const float d = sub_rn(u, t.lv[s + 4 * j]), dd = mul_rn(d, d);
      bj = dd < e ? j : bj;
      e = dd < e ? dd : e;
    }
    e4[s] = e;
    bj4 |= uint32_t(bj) << (8 * s);
  }
}

// Every lane's K coordinates u = v * scale / r: their branch metrics into sh.err / sh.bj (PS levels per subset).
template <int K, int PS>
__device__ inline void metrics_phase(int lane, Scratch& sh, const TurboTables& t, const float (&v)[4], float inv_r) {
POLYKV_KV_UNROLL
  for (int k = 0; k < K; ++k) {
    const int i = lane + 32 * k;
    const float u = mul_rn(mul_rn(v[k], t.scale), inv_r);
    float e4[4];
    uint32_t bj4;
    branch_metrics<PS>(t, u, e4, bj4);
    *reinterpret_cast<float4*>(sh.err[i]) = make_float4(e4[0], e4[1], e4[2], e4[3]);
    *reinterpret_cast<uint32_t*>(sh.bj[i]) = bj4;
  }
}

template <int K>
__device__ inline void encode_trellis_group_warp_k(int lane, Scratch& sh, const TurboTables& t, int bits,
                                                   const float* x, uint8_t* rec) {
  constexpr int n = 32 * K;
  const int tbit_bytes = n / 8, jbit_bytes = n * (bits - 1) / 8;
  float v[4];
  const double r2 = load_signed_warp<K>(lane, t, x, v);
  if (r2 == 0) return zero_record_warp(lane, rec, 2 + tbit_bytes + jbit_bytes);
  const double r = dsqrt_rn(r2);  // as the turbo form: under the butterflies
  const float inv_r = d2f_rn(ddiv_rn(1.0, r));
  butterflies_warp<K>(lane, v);
  // Branch metrics: the nearest level of each subset (first j on ties) and its squared error.
  const int per_subset = 1 << (bits - 1);
  if (per_subset == 4) metrics_phase<K, 4>(lane, sh, t, v, inv_r);       // turbo3t
  else if (per_subset == 2) metrics_phase<K, 2>(lane, sh, t, v, inv_r);  // turbo2t
  else metrics_phase<K, 8>(lane, sh, t, v, inv_r);                       // turbo4t
  __syncwarp();
  const float cost = viterbi_warp(lane, sh, t, n);
  // The best final state: the first minimum, as the reference.
  int best = 0;
  float best_cost = __shfl_sync(kWarpAll, cost, 0);
POLYKV_KV_UNROLL
  for (int k = 1; k < 8; ++k) {
    const float c = __shfl_sync(kWarpAll, cost, k);
    if (c < best_cost) best_cost = c, best = k;
  }
  // Lane c owns steps [c K, c K + K) (one from_bits word): its map takes the state after them to the
  // state before them. A suffix scan composes the maps of lanes c .. 31, then lane c + 1's composite
  // takes the best final state to the state after lane c's steps.
  const int i0 = lane * K;
  const uint32_t* fb = sh.from_bits[i0 >> 5];
  uint32_t map = 0;
POLYKV_KV_UNROLL
  for (int e = 0; e < 8; ++e) {
    int s = e;
POLYKV_KV_UNROLL
    for (int q = 3; q >= 0; --q)
      if (q < K) s = ((s << 1) | int((fb[s] >> ((i0 + q) & 31)) & 1u)) & 7;
    map |= uint32_t(s) << (3 * e);
  }
POLYKV_KV_UNROLL
  for (int d = 1; d < 32; d *= 2) {
    const uint32_t o = __shfl_down_sync(kWarpAll, map, d);
    if (lane + d < 32) map = compose_maps(map, o);
  }
  const uint32_t after = __shfl_down_sync(kWarpAll, map, 1);
  int s = lane == 31 ? best : int((after >> (3 * best)) & 7u);
  // Replay the lane's steps on the best path; ||c||² in the Blocked order.
  double c_sq[4] = {0, 0, 0, 0};
POLYKV_KV_UNROLL
  for (int q = 3; q >= 0; --q) {
    if (q < K) {
      const int i = i0 + q;
      const int w = ((s << 1) | int((fb[s] >> (i & 31)) & 1u)) & 15;
      const int sub = subset_of(t.subset_word, w);
      const int j = sh.bj[i][sub];
      sh.tb[i] = uint8_t(w >> 3);
      sh.idx[i] = uint8_t(j);
      const double cv = t.lv[sub + 4 * j];
      c_sq[q] = dmul_rn(cv, cv);
      s = w & 7;
    }
  }
  double p = c_sq[0];
POLYKV_KV_UNROLL
  for (int q = 1; q < 4; ++q)
    if (q < K) p = dadd_rn(p, c_sq[q]);
  const double c2 = warp_tree_sum(p);
  __syncwarp();  // sh.tb, sh.idx
  // The index streams first: their loads and stores run under the norm's double square root and division.
  for (int k = lane; k < tbit_bytes; k += 32) rec[2 + k] = stream_byte(sh.tb, 1, n, k);
  for (int k = lane; k < jbit_bytes; k += 32) rec[2 + tbit_bytes + k] = stream_byte(sh.idx, bits - 1, n, k);
  const float norm = d2f_rn(ddiv_rn(r, dsqrt_rn(c2)));
  if (lane == 0) store_u16(rec, half_bits(norm));
}

__device__ inline void encode_trellis_group_warp(int lane, Scratch& sh, const TurboTables& t, int bits, int n,
                                                 const float* x, uint8_t* rec) {
  if (n == 128) return encode_trellis_group_warp_k<4>(lane, sh, t, bits, x, rec);
  if (n == 64) return encode_trellis_group_warp_k<2>(lane, sh, t, bits, x, rec);
  return encode_trellis_group_warp_k<1>(lane, sh, t, bits, x, rec);
}
#endif

// quant/turbo_trellis.cpp's quantize_head for one group of n values: x[0..n) -> rec (2 + n*bits/8).
template <class Exec>
POLYKV_KV_DEV void encode_trellis_group(Exec& ex, Scratch& sh, const TurboTables& t, int bits, int n,
                                        const float* x, uint8_t* rec) {
#if defined(POLYKV_KV_WARP_FORMS)
  if constexpr (Exec::kWarpShuffles) {
    if (is_register_form(t)) return encode_trellis_group_warp(ex.lane, sh, t, bits, n, x, rec);
  }
#endif
  const int tbit_bytes = n / 8, jbit_bytes = n * (bits - 1) / 8;
  load_signed_and_norm(ex, sh, t, x, n);
  const double r2 = sh.r2;
  if (r2 == 0) return zero_record(ex, rec, 2 + tbit_bytes + jbit_bytes);
  butterflies(ex, sh, n, is_legacy(t));
  const double r = dsqrt_rn(r2);
  const float inv_r = d2f_rn(ddiv_rn(1.0, r));
  ex.each([&](int l) {
    for (int i = l; i < n; i += 32) sh.y[i] = mul_rn(mul_rn(sh.y[i], t.scale), inv_r);
  });
  // Branch metrics, independent of the path: the nearest level of each subset for every coordinate
  // (first j on ties). Lane l takes subset l & 3 (so its levels stay in registers), coordinates
  // l / 4, l / 4 + 8, ...
  const int per_subset = 1 << (bits - 1);
  ex.each([&](int l) {
    const int s = l & 3;
    float lv[8];  // unrolled with constant indices: registers
    POLYKV_KV_UNROLL
    for (int j = 0; j < 8; ++j) lv[j] = j < per_subset ? t.lv[s + 4 * j] : 0.0f;
    for (int i = l >> 2; i < n; i += 8) {
      float e = inf_f();
      int bj = 0;
      POLYKV_KV_UNROLL
      for (int j = 0; j < 8; ++j) {
        if (j >= per_subset) break;
        const float d = sub_rn(sh.y[i], lv[j]), dd = mul_rn(d, d);
        bj = dd < e ? j : bj;
        e = dd < e ? dd : e;
      }
      sh.err[i][s] = e;
      sh.bj[i][s] = uint8_t(bj);
    }
  });
  viterbi(ex, sh, t, n);
  // Trace back from the best final state (the first on ties). The state before step i is
  // ((s << 1) | from[i][s]) & 7; lane c owns the steps [c*cs, (c+1)*cs), cs = n / 32: it maps each
  // state after its steps to the state before them, one lane chains the 32 maps, then every lane
  // replays its steps from its known state.
  const int cs = n / 32;
  const bool legacy = is_legacy(t);
  // t_{i-3} of state s's survivor at step i.
  auto from = [&](int i, int s) {
    return legacy ? int(sh.from[i][s]) : int((sh.from_bits[i >> 5][s] >> (i & 31)) & 1u);
  };
  ex.each([&](int c) {
    int s[8];  // the 8 chains side by side: their loads of one step issue together
    POLYKV_KV_UNROLL
    for (int e = 0; e < 8; ++e) s[e] = e;
    for (int i = (c + 1) * cs - 1; i >= c * cs; --i) {
      POLYKV_KV_UNROLL
      for (int e = 0; e < 8; ++e) s[e] = ((s[e] << 1) | from(i, s[e])) & 7;
    }
    POLYKV_KV_UNROLL
    for (int e = 0; e < 8; ++e) sh.chunk_map[c][e] = uint8_t(s[e]);
  });
  ex.one([&] {
    const float* cost = sh.cost[(n >> 1) & 1];
    int s = 0;
    for (int k = 1; k < 8; ++k)
      if (cost[k] < cost[s]) s = k;
    for (int c = 31; c >= 0; --c) {
      sh.chunk_end[c] = uint8_t(s);
      s = sh.chunk_map[c][s];
    }
  });
  ex.each([&](int c) {
    int s = sh.chunk_end[c];
    for (int i = (c + 1) * cs - 1; i >= c * cs; --i) {
      const int w = ((s << 1) | from(i, s)) & 15;
      // The survivor's index: acs's pick = bj[subset of its window w].
      const int j = legacy ? int(sh.pick[i][s]) : int(sh.bj[i][subset_of(t.subset_word, w)]);
      sh.tb[i] = uint8_t(w >> 3);
      sh.idx[i] = uint8_t(j);
      const double cv = t.lv[subset_of(t.subset_word, w) + 4 * j];
      sh.c_sq[i] = dmul_rn(cv, cv);  // exact: a float squared fits a double
      s = w & 7;
    }
  });
  ex.each([&](int l) { sh.part[l] = lane_partial(l, n, false, [&](int i) { return sh.c_sq[i]; }); });
  ex.one([&] { sh.c2 = tree_sum32(sh.part); });  // ||c||² in the reference's order
  const float norm = d2f_rn(ddiv_rn(r, dsqrt_rn(sh.c2)));
  ex.each([&](int l) {
    if (l == 0) store_u16(rec, half_bits(norm));
    for (int k = l; k < tbit_bytes; k += 32) rec[2 + k] = stream_byte(sh.tb, 1, n, k);
    for (int k = l; k < jbit_bytes; k += 32) rec[2 + tbit_bytes + k] = stream_byte(sh.idx, bits - 1, n, k);
  });
}

// ---- register forms of the q8_0 and q4_0 encoders (GPU; the default) ----
//
// The array forms give a 32-value block to one lane: at head_dim 128 four lanes of the warp walk 32 loads, a
// 32-step max and 32 byte stores each (kv_store of one q8_0/q8_0 decode row: 3.65 us on the H200 against f16's
// 1.49, call H1 of 2026-12-02). Here lane l holds value l of every block: the loads and the byte stores are
// coalesced, and a block's max |x| is a butterfly of 5 shuffles, for 4 blocks side by side. The max of finite
// non-negative floats does not depend on the order, and every other operation is the block form's on the same
// operands: the same bytes (POLYKV_CUDA_KV_BLOCK_WARP=0 runs the block form on the GPU).
#if defined(POLYKV_KV_WARP_FORMS)
// Blocks [b0, b0 + 4) of x (those below nb): v[k] = value `lane` of block b0 + k, a[k] = the block's max |x|
// (every lane); iv[k] (q4_0) = the index of the block's first value of that magnitude.
template <bool kIndex>
__device__ inline void block_max_warp(int lane, const float* x, int b0, int nb, float (&v)[4], float (&a)[4],
                                      int (&iv)[4]) {
POLYKV_KV_UNROLL
  for (int k = 0; k < 4; ++k) {
    v[k] = b0 + k < nb ? x[32 * (b0 + k) + lane] : 0.0f;
    a[k] = fabs_(v[k]);
    iv[k] = lane;
  }
POLYKV_KV_UNROLL
  for (int h = 16; h >= 1; h /= 2)
POLYKV_KV_UNROLL
    for (int k = 0; k < 4; ++k) {
      const float o = __shfl_xor_sync(kWarpAll, a[k], h);
      if constexpr (kIndex) {
        const int oi = __shfl_xor_sync(kWarpAll, iv[k], h);
        if (a[k] < o || (a[k] == o && oi < iv[k])) iv[k] = oi;  // larger |x|, then the first index
      }
      a[k] = a[k] < o ? o : a[k];
    }
}

// encode_q8_0_block for each of the nb = head_dim / 32 blocks of x -> dst (34 bytes a block).
__device__ inline void encode_q8_0_warp(int lane, int nb, const float* x, uint8_t* dst) {
  for (int b0 = 0; b0 < nb; b0 += 4) {
    float v[4], a[4];
    int iv[4];
    block_max_warp<false>(lane, x, b0, nb, v, a, iv);
POLYKV_KV_UNROLL
    for (int k = 0; k < 4; ++k) {
      if (b0 + k >= nb) break;
      const float d = div_rn(a[k], 127.0f);
      const float id = d != 0.0f ? div_rn(1.0f, d) : 0.0f;
      uint8_t* blk = dst + 34 * (b0 + k);
      if (lane == 0) store_u16(blk, half_bits(d));
      blk[2 + lane] = uint8_t(int8_t(to_int_x86(round_away(mul_rn(v[k], id)))));
    }
  }
}

// encode_q4_0_block likewise (18 bytes a block): the signed value of the first largest |x| (0 when every value is
// zero, as the block form's initial vmax), lane l < 16 packs its nibble with lane l + 16's.
__device__ inline void encode_q4_0_warp(int lane, int nb, const float* x, uint8_t* dst) {
  for (int b0 = 0; b0 < nb; b0 += 4) {
    float v[4], a[4];
    int iv[4];
    block_max_warp<true>(lane, x, b0, nb, v, a, iv);
POLYKV_KV_UNROLL
    for (int k = 0; k < 4; ++k) {
      if (b0 + k >= nb) break;
      const float vm = __shfl_sync(kWarpAll, v[k], iv[k]);
      const float vmax = a[k] > 0.0f ? vm : 0.0f;
      const float d = div_rn(vmax, -8.0f);
      const float id = d != 0.0f ? div_rn(1.0f, d) : 0.0f;
      const int t = int(int8_t(to_int_x86(add_rn(mul_rn(v[k], id), 8.5f))));
      const uint32_t q = uint32_t(t < 15 ? t : 15) & 0x0Fu;
      const uint32_t hi = __shfl_down_sync(kWarpAll, q, 16);
      uint8_t* blk = dst + 18 * (b0 + k);
      if (lane == 0) store_u16(blk, half_bits(d));
      if (lane < 16) blk[2 + lane] = uint8_t(q | (hi << 4));
    }
  }
}
#endif

// ---- one unit of any type ----

// x: the unit's p.unit_values inputs (f32, original basis); dst: its p.unit_bytes in the row.
template <class Exec>
POLYKV_KV_DEV void encode_unit(Exec& ex, Scratch& sh, const SideParams& p, const float* x, uint8_t* dst) {
  const int hd = p.head_dim;
  switch (p.codec) {
    case Codec::F32: case Codec::F16: case Codec::BF16: case Codec::Q8_0: case Codec::Q4_0: {
#if defined(POLYKV_KV_WARP_FORMS)
      if constexpr (Exec::kWarpShuffles) {  // q8_0 / q4_0: one lane per value (register forms)
        if (is_register_form(p.tab) && p.codec == Codec::Q8_0) return encode_q8_0_warp(ex.lane, hd / 32, x, dst);
        if (is_register_form(p.tab) && p.codec == Codec::Q4_0) return encode_q4_0_warp(ex.lane, hd / 32, x, dst);
      }
#endif
      const KvType t = p.codec == Codec::F32    ? KvType::F32
                       : p.codec == Codec::F16  ? KvType::F16
                       : p.codec == Codec::BF16 ? KvType::BF16
                       : p.codec == Codec::Q8_0 ? KvType::Q8_0
                                                : KvType::Q4_0;
      return ex.each([&](int l) { encode_plain_lane(l, t, hd, x, dst); });
    }
    case Codec::Turbo: return encode_turbo_group(ex, sh, p.tab, p.bits, p.unit_values, x, dst);
    case Codec::Trellis: return encode_trellis_group(ex, sh, p.tab, p.bits, p.unit_values, x, dst);
  }
}

// ---- host side ----

// The parameters of type t for rows of head_dim values; the tables are copied from quant/'s own.
// Throws Error if t cannot hold head_dim (kv/kv_type.h rules). Host code, shared by the CUDA
// launcher and the CPU test (which is built with or without CUDA).
inline SideParams make_side_params(KvType t, int head_dim) {
  SideParams p;
  p.head_dim = head_dim;
  p.head_bytes = uint32_t(kv_head_bytes(t, head_dim));  // validates head_dim for t
  p.unit_values = head_dim;
  p.units = 1;
  p.unit_bytes = p.head_bytes;
  p.tab = TurboTables{};
  switch (t) {
    case KvType::F32: p.codec = Codec::F32; return p;
    case KvType::F16: p.codec = Codec::F16; return p;
    case KvType::BF16: p.codec = Codec::BF16; return p;
    case KvType::Q8_0: case KvType::Q4_0: {
      p.codec = t == KvType::Q8_0 ? Codec::Q8_0 : Codec::Q4_0;
      // POLYKV_CUDA_KV_BLOCK_WARP=0: a lane per block (the array form) instead of a lane per value.
      const char* e = std::getenv("POLYKV_CUDA_KV_BLOCK_WARP");
      p.tab.form = e && std::strcmp(e, "0") == 0 ? EncoderForm::Array : EncoderForm::Registers;
      return p;
    }
    case KvType::Turbo4: case KvType::Turbo3: case KvType::Turbo2:
      p.codec = Codec::Turbo;
      p.bits = t == KvType::Turbo4 ? 4 : t == KvType::Turbo3 ? 3 : 2;
      break;
    case KvType::Turbo4T: case KvType::Turbo3T: case KvType::Turbo2T:
      p.codec = Codec::Trellis;
      p.bits = t == KvType::Turbo4T ? 4 : t == KvType::Turbo3T ? 3 : 2;
      break;
  }
  const int n = turbo::group_size(head_dim);
  p.unit_values = n;
  p.units = head_dim / n;
  p.unit_bytes = uint32_t(2 + n * p.bits / 8);
  check(size_t(p.unit_bytes) * size_t(p.units) == p.head_bytes, "kv_store: turbo record size mismatch");
  const float* sign = turbo::detail::sign_table(n);
  std::copy(sign, sign + n, p.tab.sign);
  for (int i = 0; i < n; ++i)
    if (sign[i] < 0.0f) p.tab.sign_neg[i >> 5] |= 1u << (i & 31);
  p.tab.scale = float(1.0 / std::sqrt(double(n)));  // as quant/turbo_rotation.cpp's fwht
  const char* form = std::getenv("POLYKV_CUDA_KV_VITERBI");
  const auto is = [&](const char* v) { return form && std::strcmp(form, v) == 0; };
  p.tab.form = is("old")      ? EncoderForm::Legacy
               : is("array")  ? EncoderForm::Array
               : is("radix2") ? EncoderForm::RegistersRadix2
                              : EncoderForm::Registers;
  if (p.codec == Codec::Turbo) {
    const float* lv = turbo::levels(p.bits, n);
    const int n_levels = 1 << p.bits;
    std::copy(lv, lv + n_levels, p.tab.lv);
    for (int k = 0; k + 1 < n_levels; ++k) p.tab.mid[k] = 0.5f * (lv[k] + lv[k + 1]);  // as quantize_head
  } else {
    const float* lv = turbo::trellis::levels(p.bits, n);
    std::copy(lv, lv + (2 << p.bits), p.tab.lv);
    p.tab.subset_word = turbo::trellis::kSubsetWord;
  }
  return p;
}

// ---- where a unit's values come from and its bytes go (kv/kv_block_store.h's layout) ----

struct StoreSide {
  SideParams p;
  const float* src;  // [n][n_head][head_dim] f32
  uint8_t* base;     // the layer's K part (K) or V part (V) of block 0
};

// One kv_store call. Units [0, units_k) are K's, then V's; unit u of a side is (row, head, part) =
// (u / (n_head * units), (u / units) % n_head, u % units), units = the side's units per (row, head).
struct StoreArgs {
  StoreSide side[2];      // K, V
  const int32_t* slots;   // [n] block * block_tokens + offset; < 0: a padding row, nothing written
  int n_head = 0, block_tokens = 0;
  size_t block_stride = 0;  // bytes from one block to the next (all layers)
  int64_t units_k = 0, units_total = 0;
};

// The rows of (row, head g, slot i of block b) start at base + b * block_stride +
// (g * block_tokens + i) * head_bytes (kv/kv_cuda.h). Host code; throws Error on a bad type/head_dim.
inline StoreArgs make_store_args(KvType k_type, int head_dim, KvType v_type, int head_dim_v, int n_head,
                                 int block_tokens, uint8_t* layer_base, size_t block_stride, size_t v_offset,
                                 const int32_t* slots, int n, const float* k, const float* v) {
  check(n_head > 0 && block_tokens > 0 && n >= 0, "kv_store: bad shape");
  StoreArgs a;
  a.side[0] = StoreSide{make_side_params(k_type, head_dim), k, layer_base};
  a.side[1] = StoreSide{make_side_params(v_type, head_dim_v), v, layer_base + v_offset};
  a.slots = slots;
  a.n_head = n_head;
  a.block_tokens = block_tokens;
  a.block_stride = block_stride;
  const int64_t rows_heads = int64_t(n) * n_head;
  a.units_k = rows_heads * a.side[0].p.units;
  a.units_total = a.units_k + rows_heads * a.side[1].p.units;
  return a;
}

// The side, inputs and destination of unit `unit` (< units_total); false for a padding row.
POLYKV_KV_DEV bool locate_unit(const StoreArgs& a, int64_t unit, int& side, const float*& x, uint8_t*& dst) {
  side = unit >= a.units_k ? 1 : 0;
  const StoreSide& s = a.side[side];
  const int64_t u = side ? unit - a.units_k : unit;
  const int part = int(u % s.p.units);
  const int64_t row_head = u / s.p.units;
  const int head = int(row_head % a.n_head);
  const int64_t row = row_head / a.n_head;
  const int32_t slot = a.slots[row];
  if (slot < 0) return false;
  const int64_t block = slot / a.block_tokens, offset = slot % a.block_tokens;
  x = s.src + (row * a.n_head + head) * s.p.head_dim + int64_t(part) * s.p.unit_values;
  dst = s.base + size_t(block) * a.block_stride + size_t(int64_t(head) * a.block_tokens + offset) * s.p.head_bytes +
        size_t(part) * s.p.unit_bytes;
  return true;
}

#ifndef __CUDACC__
// The CPU executor: runs each phase's lanes one after another, in the order `order` (a permutation
// of 0..31; shuffled orders check that the lanes of a phase are independent).
struct HostExec {
  static constexpr bool kWarpShuffles = false;  // viterbi runs its array form
  int order[32];
  explicit HostExec(uint32_t shuffle_seed = 0) {
    std::iota(order, order + 32, 0);
    if (shuffle_seed) std::shuffle(order, order + 32, std::mt19937(shuffle_seed));
  }
  template <class F>
  void each(F&& f) {
    for (int l : order) f(l);
  }
  template <class F>
  void one(F&& f) {
    f();
  }
};

// One (row, head) on the CPU with the GPU's algorithm: x [head_dim] -> dst [p.head_bytes].
inline void encode_head_host(const SideParams& p, const float* x, uint8_t* dst, uint32_t shuffle_seed = 0) {
  HostExec ex(shuffle_seed);
  Scratch sh;
  for (int u = 0; u < p.units; ++u)
    encode_unit(ex, sh, p, x + size_t(u) * size_t(p.unit_values), dst + size_t(u) * p.unit_bytes);
}

// kv_store on the CPU with the GPU's algorithm and addressing (host pointers): one unit at a time.
inline void kv_store_host(const StoreArgs& a, uint32_t shuffle_seed = 0) {
  HostExec ex(shuffle_seed);
  Scratch sh;
  for (int64_t unit = 0; unit < a.units_total; ++unit) {
    int side;
    const float* x;
    uint8_t* dst;
    if (locate_unit(a, unit, side, x, dst)) encode_unit(ex, sh, a.side[side].p, x, dst);
  }
}
#endif

}  // namespace polykv::cuda::enc
