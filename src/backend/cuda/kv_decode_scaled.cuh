// Scaled piece decoders for the lane-per-8-values decode attention kernel
// (attention_cuda_decode8.cuh): values 8c .. 8c+7 of a row in the stored basis as v[k] times a
// returned scale (1 for float types, the q8_0/q4_0 block's d, the turbo group's norm), so the kernel
// applies the scale once per 8 values (after the dot for K, on the probability for V) instead of per
// value. v[k] * scale is bit-identical to decode8 (kv_decode.cuh): the same two floats multiplied.
//
// Turbo levels come from a flat table `lut` of 128 floats (scaled_lut_entry): turbo<b>: level i at i;
// turbo<b>t: the level of trellis window w and index j at w + 16 j, so a trellis value is one lookup
// without the subset word.
//
// __host__ __device__ (POLYKV_HD): tests/cuda_kv_decode_scaled_test.cpp runs these on the CPU
// against decode8.
#pragma once
#include "backend/cuda/kv_decode.cuh"

namespace polykv::cuda {

constexpr int kScaledLutSize = 128;

// Entry i (< kScaledLutSize) of the lookup table of type t; lv: kv_levels of t; 0 where unused and
// for types without levels.
POLYKV_HD float scaled_lut_entry(KvType t, const float* lv, uint32_t subset_word, int i) {
  if (const int b = kv_trellis_bits(t)) {
    const int w = i & 15, j = i >> 4;
    return j < (1 << (b - 1)) ? lv[((subset_word >> (2 * w)) & 3u) + 4 * j] : 0.0f;
  }
  if (const int b = kv_turbo_bits(t)) return i < (1 << b) ? lv[i] : 0.0f;
  return 0.0f;
}

// Values 8c .. 8c+7 of a row of head_dim values (stored basis) as v[k] * (returned scale).
template <KvType T>
POLYKV_HD float decode8s(const uint8_t* row, int c, int head_dim, const float* lut, float* v) {
  if constexpr (T == KvType::F32 || T == KvType::F16 || T == KvType::BF16) {
    decode8<T>(row, c, head_dim, nullptr, 0, v);
    return 1.0f;
  } else if constexpr (T == KvType::Q8_0) {
    // Block c / 4 (34 bytes: fp16 d, 32 int8), its quarter c % 4.
    const uint8_t* blk = row + 34 * (c >> 2);
    uint32_t w0, w1;
    ld_u32x2(blk + 2 + 8 * (c & 3), w0, w1);
    w0 ^= 0x80808080u;  // int8 x -> x + 128
    w1 ^= 0x80808080u;
#pragma unroll
    for (int k = 0; k < 8; ++k) v[k] = bits_to_float(magic_byte(k < 4 ? w0 : w1, k & 3)) - (kMagic + 128.0f);
    return half_to_float(ld_u16(blk));
  } else if constexpr (T == KvType::Q4_0) {
    // Block c / 4 (18 bytes: fp16 d, 16 bytes): value j < 16 is the low nibble of byte j, j >= 16
    // the high nibble of byte j - 16; quarter c % 4 is bytes 8 (c & 1) .. +7, nibble (c & 2) / 2.
    const uint8_t* blk = row + 18 * (c >> 2);
    const int shift = (c & 2) * 2;
    uint32_t w0, w1;
    ld_u32x2(blk + 2 + 8 * (c & 1), w0, w1);
#pragma unroll
    for (int k = 0; k < 8; ++k)
      v[k] = bits_to_float(0x4B000000u | (((k < 4 ? w0 : w1) >> (8 * (k & 3) + shift)) & 15u)) - (kMagic + 8.0f);
    return half_to_float(ld_u16(blk));
  } else if constexpr (kv_turbo_bits(T) != 0) {
    constexpr int b = kv_turbo_bits(T);
    const int n = turbo_group_of(head_dim);
    const int i0 = 8 * c, g = i0 / n, i = i0 - g * n;
    const uint8_t* rec = row + g * (2 + n * b / 8);
    const uint8_t* ib = rec + 2 + b * (i >> 3);  // 8 indices of b bits: b bytes, LSB first
    uint32_t bits;
    if constexpr (b == 2) bits = ld_u16(ib);
    else if constexpr (b == 4) bits = ld_u32(ib);
    else bits = ld_u8(ib) | (ld_u8(ib + 1) << 8) | (ld_u8(ib + 2) << 16);
#pragma unroll
    for (int k = 0; k < 8; ++k) v[k] = lut[(bits >> (b * k)) & ((1u << b) - 1)];
    return half_to_float(ld_u16(rec));
  } else {
    static_assert(kv_trellis_bits(T) != 0, "unknown KV type");
    constexpr int b = kv_trellis_bits(T);
    const int n = turbo_group_of(head_dim);
    const int i0 = 8 * c, g = i0 / n, i = i0 - g * n;
    const uint8_t* rec = row + g * (2 + n * b / 8);
    const uint8_t* tb = rec + 2;
    const uint8_t* jb = rec + 2 + n / 8 + (b - 1) * (i >> 3);  // 8 indices of b-1 bits
    // x bit k = trellis bit t_{i-3+k} (t_m = 0 for m < 0): the window of coordinate i + k is (x >> k) & 15.
    const uint32_t prev = i > 0 ? ld_u8(tb + (i >> 3) - 1) >> 5 : 0u;
    const uint32_t x = prev | (ld_u8(tb + (i >> 3)) << 3);
    uint32_t js;
    if constexpr (b == 2) js = ld_u8(jb);
    else if constexpr (b == 3) js = ld_u8(jb) | (ld_u8(jb + 1) << 8);
    else js = ld_u8(jb) | (ld_u8(jb + 1) << 8) | (ld_u8(jb + 2) << 16);
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const uint32_t j = (js >> ((b - 1) * k)) & ((1u << (b - 1)) - 1);
      v[k] = lut[((x >> k) & 15u) | (j << 4)];
    }
    return half_to_float(ld_u16(rec));
  }
}

}  // namespace polykv::cuda
