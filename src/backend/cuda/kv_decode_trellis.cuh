// A cheaper piece decoder of the trellis KV types (turbo2t / turbo3t / turbo4t) for the lane-per-8-values
// decode attention kernel (attention_cuda_decode8.cuh): the same 8 floats as decode8s (kv_decode_scaled.cuh),
// bit for bit (the same table entries, the same scale), with fewer integer instructions per value.
//
// decode8s forms each value's table index on its own: (x >> k) & 15 for the trellis window, (js >> (b-1)k) &
// (2^(b-1) - 1) for the index bits, a bit-field insert, a shift to a byte offset and an add of the table's base
// (PTX: ~7 integer instructions and one shared load per value, plus ~25 for the piece's addresses).
// decode8s_packed forms the byte offsets of two values at once in the two 16-bit halves of one word
// (docs/CUDA_ATTENTION.md "Counting the trellis decode"):
//   X4 = x * (4 + 2^17): x << 2 in bits 2..12 and x << 17 in bits 17..27 (x has 11 bits: no overlap);
//   (X4 >> 2m) & 0x003C003C: 4 * window of value 2m in the low half, 4 * window of value 2m + 1 in the high half;
//   jz = the 2 (b-1) index bits of values 2m, 2m+1; jz * (2^6 + 2^(22 - (b-1))) puts j(2m) at bit 6 and
//   j(2m+1) at bit 22 (the two copies of jz lie in bits 6..11 and 19..24: disjoint, no carries), masked;
//   the half is 4 * (window | j << 4) = the byte offset of the entry scaled_lut_entry puts at window + 16 j
//   (< 512: fits the half).
// Per pair of values: a shift, two masks, a multiply, a bit-field extract and an or; per value a half
// extract and the shared load (~4 integer instructions per value instead of ~7).
//
// __host__ __device__ (POLYKV_HD): tests/cuda_kv_decode_trellis_test.cpp checks it against decode8s for every
// trellis type, head size and piece on the CPU.
#pragma once
#include "backend/cuda/kv_decode_scaled.cuh"

namespace polykv::cuda {

// Bytes of one (token, KV head) row of type t and head_dim values, as a compile-time constant (the
// specialized decode kernels' row strides); equal to kv_head_bytes (tests/cuda_kv_decode_trellis_test.cpp).
POLYKV_HD constexpr int kv_row_bytes_const(KvType t, int head_dim) {
  if (t == KvType::F32) return 4 * head_dim;
  if (t == KvType::F16 || t == KvType::BF16) return 2 * head_dim;
  if (t == KvType::Q8_0) return 34 * (head_dim / 32);
  if (t == KvType::Q4_0) return 18 * (head_dim / 32);
  const int b = kv_turbo_bits(t) ? kv_turbo_bits(t) : kv_trellis_bits(t), n = turbo_group_of(head_dim);
  return (head_dim / n) * (2 + n * b / 8);
}

// The float at byte offset `off` (a multiple of 4) of the table lut.
POLYKV_HD float lut_at_byte(const float* lut, uint32_t off) {
  return *reinterpret_cast<const float*>(reinterpret_cast<const unsigned char*>(lut) + off);
}

// Values 8c .. 8c+7 of a row of head_dim values (stored basis) as v[k] * (returned scale), identical to
// decode8s<T>; trellis types take the packed path, every other type is decode8s itself.
template <KvType T>
POLYKV_HD float decode8s_packed(const uint8_t* row, int c, int head_dim, const float* lut, float* v) {
  if constexpr (kv_trellis_bits(T) == 0) {
    return decode8s<T>(row, c, head_dim, lut, v);
  } else {
    constexpr int b = kv_trellis_bits(T), nb = b - 1;
    constexpr uint32_t jmask = (1u << (2 * nb)) - 1;                           // index bits of two values
    constexpr uint32_t jmul = (1u << 6) + (1u << (22 - nb));                   // j(2m) -> bit 6, j(2m+1) -> bit 22
    constexpr uint32_t jkeep = (((1u << nb) - 1) << 6) | (((1u << nb) - 1) << 22);
    const int n = turbo_group_of(head_dim);
    const int i0 = 8 * c, g = i0 / n, i = i0 - g * n;
    const uint8_t* rec = row + g * (2 + n * b / 8);
    const uint8_t* tb = rec + 2;
    const uint8_t* jb = rec + 2 + n / 8 + nb * (i >> 3);  // 8 indices of b-1 bits
    // x bit k = trellis bit t_{i-3+k} (t_m = 0 for m < 0), as decode8s.
    const uint32_t prev = i > 0 ? ld_u8(tb + (i >> 3) - 1) >> 5 : 0u;
    const uint32_t x = prev | (ld_u8(tb + (i >> 3)) << 3);
    uint32_t js;
    if constexpr (nb == 1) js = ld_u8(jb);
    else if constexpr (nb == 2) js = ld_u8(jb) | (ld_u8(jb + 1) << 8);
    else js = ld_u8(jb) | (ld_u8(jb + 1) << 8) | (ld_u8(jb + 2) << 16);
    const uint32_t x4 = x * 0x20004u;
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      const uint32_t jz = (js >> (2 * nb * m)) & jmask;
      const uint32_t off = ((x4 >> (2 * m)) & 0x003C003Cu) | ((jz * jmul) & jkeep);
      v[2 * m] = lut_at_byte(lut, off & 0xffffu);
      v[2 * m + 1] = lut_at_byte(lut, off >> 16);
    }
    return half_to_float(ld_u16(rec));
  }
}

}  // namespace polykv::cuda
