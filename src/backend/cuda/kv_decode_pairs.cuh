// A piece decoder of the turbo and trellis KV types for the lanes8 decode attention kernel
// (attention_cuda_decode8.cuh; the default, POLYKV_CUDA_ATTN_D8=packed for the previous decoder) that looks up TWO values per shared-memory load:
// the same 8 floats as decode8s (kv_decode_scaled.cuh), bit for bit, with about half the integer work.
//
// Why (docs/CUDA_ATTENTION.md "Pair tables"): decode8s_packed spends per value a half extract, a shared
// load and ~3 integer instructions forming the offset. Two consecutive values of a piece are fully
// determined by a few bits:
//   turbo<b>:  their 2b index bits            -> pair index P = (bits >> 2bm) & (2^2b - 1);
//   turbo<b>t: their two 4-bit trellis windows overlap in 5 bits y = (x >> 2m) & 31 (window of value 2m
//              is y & 15, of value 2m + 1 is y >> 1) plus their 2(b-1) index bits z -> P = y | z << 5.
// A table of float pairs indexed by P (pair_lut_entry) gives both values with one 8-byte load. The byte
// offset 8P is formed directly by shifts of the piece's bits (one shift and one mask per field,
// compile-time shift counts), so a pair costs ~4 integer instructions + one LDS.64 instead of ~10.
// Table sizes (float pairs): turbo2 16, turbo3 64, turbo4 256, turbo2t 128, turbo3t 512 (4 KB);
// turbo4t would need 2048 (16 KB): it keeps the packed decoder (pair_lut_size 0).
//
// __host__ __device__ (POLYKV_HD): tests/cuda_kv_decode_pairs_test.cpp checks it against decode8s for
// every type, head size and piece on the CPU.
#pragma once
#include "backend/cuda/kv_decode_trellis.cuh"

namespace polykv::cuda {

// Float pairs in the pair table of type t (0: t has none; its pieces take decode8s_packed).
POLYKV_HD constexpr int pair_lut_size(KvType t) {
  if (const int b = kv_turbo_bits(t)) return 1 << (2 * b);
  const int b = kv_trellis_bits(t);
  return b == 2 || b == 3 ? 32 << (2 * (b - 1)) : 0;
}
constexpr int kPairLutMax = 512;  // the largest pair_lut_size (turbo3t)

// Entry i (< pair_lut_size(t)) of t's pair table: the two values (a: value 2m, b: value 2m + 1) whose bits
// form pair index i, from the levels lv (kv_levels) through scaled_lut_entry (the same floats as decode8s).
POLYKV_HD void pair_lut_entry(KvType t, const float* lv, uint32_t subset_word, int i, float& a, float& b) {
  if (const int tb = kv_trellis_bits(t)) {
    const int nb = tb - 1, y = i & 31, z = i >> 5;
    a = scaled_lut_entry(t, lv, subset_word, (y & 15) | ((z & ((1 << nb) - 1)) << 4));
    b = scaled_lut_entry(t, lv, subset_word, (y >> 1) | ((z >> nb) << 4));
  } else {
    const int bits = kv_turbo_bits(t);
    a = scaled_lut_entry(t, lv, subset_word, i & ((1 << bits) - 1));
    b = scaled_lut_entry(t, lv, subset_word, i >> bits);
  }
}

// v << s for s >= 0, v >> -s otherwise (s a compile-time constant after unrolling).
template <int S>
POLYKV_HD uint32_t shift_by(uint32_t v) {
  if constexpr (S >= 0) return v << S;
  else return v >> (-S);
}

// The two floats at byte offset off (a multiple of 8) of the pair table plut: one 8-byte shared load on
// the device.
POLYKV_HD void pair_at_byte(const float* plut, uint32_t off, float& a, float& b) {
#if defined(__CUDA_ARCH__)
  const float2 p = *reinterpret_cast<const float2*>(reinterpret_cast<const unsigned char*>(plut) + off);
  a = p.x;
  b = p.y;
#else
  a = plut[off / 4];
  b = plut[off / 4 + 1];
#endif
}

// The byte offsets of pair m of a piece (8 values) in a pair table of 2^L-byte entries (L = 3: float pairs,
// L = 2: f16 pairs): turbo<B> from the piece's index bits, trellis from its window bits x (11 bits,
// decode8s's) and index bits js.
template <int B, int M, int L = 3>
POLYKV_HD uint32_t turbo_pair_off(uint32_t bits) {
  constexpr uint32_t mask = ((1u << (2 * B)) - 1) << L;
  return shift_by<L - 2 * B * M>(bits) & mask;
}
template <int NB, int M, int L = 3>
POLYKV_HD uint32_t trellis_pair_off(uint32_t x, uint32_t js) {
  constexpr uint32_t ymask = 31u << L, zmask = ((1u << (2 * NB)) - 1) << (L + 5);
  return (shift_by<L - 2 * M>(x) & ymask) | (shift_by<L + 5 - 2 * NB * M>(js) & zmask);
}

// Values 8c .. 8c+7 of a row of head_dim values (stored basis) as v[k] * (returned scale), identical to
// decode8s<T>. Types with a pair table read plut (pair_lut_entry, 8-byte aligned); the others forward to
// decode8s_packed with lut (the scaled_lut_entry table).
template <KvType T>
POLYKV_HD float decode8s_pairs(const uint8_t* row, int c, int head_dim, const float* lut, const float* plut, float* v) {
  if constexpr (pair_lut_size(T) == 0) {
    (void)plut;
    return decode8s_packed<T>(row, c, head_dim, lut, v);
  } else if constexpr (kv_turbo_bits(T) != 0) {
    (void)lut;
    constexpr int b = kv_turbo_bits(T);
    const int n = turbo_group_of(head_dim);
    const int i0 = 8 * c, g = i0 / n, i = i0 - g * n;
    const uint8_t* rec = row + g * (2 + n * b / 8);
    const uint8_t* ib = rec + 2 + b * (i >> 3);  // 8 indices of b bits: b bytes, LSB first (as decode8s)
    uint32_t bits;
    if constexpr (b == 2) bits = ld_u16(ib);
    else if constexpr (b == 4) bits = ld_u32(ib);
    else bits = ld_u8(ib) | (ld_u8(ib + 1) << 8) | (ld_u8(ib + 2) << 16);
    pair_at_byte(plut, turbo_pair_off<b, 0>(bits), v[0], v[1]);
    pair_at_byte(plut, turbo_pair_off<b, 1>(bits), v[2], v[3]);
    pair_at_byte(plut, turbo_pair_off<b, 2>(bits), v[4], v[5]);
    pair_at_byte(plut, turbo_pair_off<b, 3>(bits), v[6], v[7]);
    return half_to_float(ld_u16(rec));
  } else {
    (void)lut;
    constexpr int b = kv_trellis_bits(T), nb = b - 1;
    const int n = turbo_group_of(head_dim);
    const int i0 = 8 * c, g = i0 / n, i = i0 - g * n;
    const uint8_t* rec = row + g * (2 + n * b / 8);
    const uint8_t* tb = rec + 2;
    const uint8_t* jb = rec + 2 + n / 8 + nb * (i >> 3);  // 8 indices of b-1 bits
    // x bit k = trellis bit t_{i-3+k} (t_m = 0 for m < 0), as decode8s.
    const uint32_t prev = i > 0 ? ld_u8(tb + (i >> 3) - 1) >> 5 : 0u;
    const uint32_t x = prev | (ld_u8(tb + (i >> 3)) << 3);
    // nb == 2: jb = rec + 2 + n / 8 + 2c is even (rows and records have even sizes: 2-byte aligned in the
    // pool), so one 16-bit load instead of two byte loads, a shift and an or.
    uint32_t js;
    if constexpr (nb == 1) js = ld_u8(jb);
    else js = ld_u16(jb);
    pair_at_byte(plut, trellis_pair_off<nb, 0>(x, js), v[0], v[1]);
    pair_at_byte(plut, trellis_pair_off<nb, 1>(x, js), v[2], v[3]);
    pair_at_byte(plut, trellis_pair_off<nb, 2>(x, js), v[4], v[5]);
    pair_at_byte(plut, trellis_pair_off<nb, 3>(x, js), v[6], v[7]);
    return half_to_float(ld_u16(rec));
  }
}

}  // namespace polykv::cuda
