// The tensor-core pieces every CUDA kernel on mma.sync shares, in one place: the quantized mat-mul
// (matmul_cuda_mmq2.cu), the MoE experts' mat-mul (moe_cuda_v2.cu) and the attention prefill / prefix
// kernels (attention_cuda_mma.cuh, attention_cuda_prefix256.cuh).
//
//  - hd:: (host and device; tests/cuda_mmq_test.cpp and tests/cuda_mmq_stage_test.cpp run them on the
//    CPU): f16x2 packing, and the A fragments of the quantized mat-muls built from a thread's two
//    decoded units (rows g and g + 8 of an m16 tile; matmul_cuda_mmq.cuh has the fragment layout):
//    by f32 dequantization rounded to f16 (every split type), or by f16 arithmetic for q4_0 / q8_0
//    (the same f16 values, fewer instructions); the loads of a thread's units of its rows.
//  - mma:: (device only): the PTX wrappers (mma.sync m16n8k16 f16 x f16 -> f32, ldmatrix x4 and
//    x4.trans, cp.async with zero fill and its commit / wait) and the B fragment of 4 f16 activations
//    from global memory.
//
// Register layouts of mma.m16n8k16 (g = lane / 4, t = lane % 4; two f16 per 32-bit register, the lower
// index in the low half): A (16 x 16, row-major) a0 = (g, 2t..2t+1), a1 = (g+8, 2t..), a2 = (g, 2t+8..),
// a3 = (g+8, 2t+8..); B (16 x 8, k x n) b0 = (k 2t..2t+1, n g), b1 = (k 2t+8.., n g); C (16 x 8)
// c0, c1 = (g, 2t..2t+1), c2, c3 = (g+8, 2t..2t+1).
#pragma once
#include <cstdint>

#include "backend/cuda/matmul_cuda_mmq.cuh"
#include "backend/cuda/matmul_cuda_split.cuh"
#include "core/fp16.h"

namespace polykv::cuda::hd {

// f16x2 of (lo, hi), each rounded to nearest even; lo in the low half.
POLYKV_HD uint32_t pack_half2(float lo, float hi) {
#ifdef __CUDA_ARCH__
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
#else
  return uint32_t(f32_to_fp16(lo)) | (uint32_t(f32_to_fp16(hi)) << 16);
#endif
}

// A fragment of k-step j (word j of the units) from the decoded units of rows g (lo) and g + 8 (hi) of
// an m16 tile: f16 of unit_word_values (exact f32, one rounding). has = false (a unit past the row's
// last): zeros.
template <class U>
POLYKV_HD void mmq_a_fragment(const U& lo, const U& hi, int j, bool has, uint32_t (&af)[4]) {
  float l[4], h[4];
  unit_word_values(lo, j, l);
  unit_word_values(hi, j, h);
  af[0] = has ? pack_half2(l[0], l[1]) : 0u;
  af[1] = has ? pack_half2(h[0], h[1]) : 0u;
  af[2] = has ? pack_half2(l[2], l[3]) : 0u;
  af[3] = has ? pack_half2(h[2], h[3]) : 0u;
}

// ---- f16 dequantization of q4_0 / q8_0 ----
// A q4_0 value is f16(d * (q - 8)), a q8_0 value f16(d * q) (unit_word_values then pack_half2: the f32
// product is exact, one rounding to f16). The same f16 comes from f16 arithmetic: the byte b (q4_0: the
// nibble q; q8_0: q + 128) placed under the exponent of 1024 (0x6400 | b = 1024 + b, exact), minus
// 1032 (q4_0) / 1152 (q8_0) (exact: a small integer), times d (one rounding of the exact product).
// So 3 instructions (byte permute, HADD2, HMUL2) per pair of values instead of 7 (2 x (permute, FADD,
// FFMA) + F2F). A zero may get the other sign (d < 0, q = 8), which no f32 sum of the mma sees.
template <class T>
POLYKV_HDC constexpr bool mmq_half_dequant() {
  return T::kBlockValues == 32 && T::kParts == 1 && T::kGroups == 1 && (T::kBlockBytes == 18 || T::kBlockBytes == 34);
}

// The byte word the permute reads for word w of a decoded q4_0 / q8_0 unit (q8_0: bytes biased by 128).
template <class T, class U>
POLYKV_HD uint32_t mmq_half_bytes(const U& u, int w) {
  return T::kBlockBytes == 34 ? (u.q[w] ^ 0x80808080u) : u.q[w];
}
// 1024 + the bias: the f16 subtrahend.
template <class T>
POLYKV_HDC constexpr float mmq_half_bias() { return T::kBlockBytes == 34 ? 1152.0f : 1032.0f; }

// f16x2 (low half: byte 2 p, high half: byte 2 p + 1 of `bytes`, p = 0 or 1) of d * (byte - bias + 1024)
// where d2 holds the block's f16 d (bits) twice. Device: PRMT, HSUB2, HMUL2; host: the same roundings.
template <class T>
POLYKV_HD uint32_t mmq_half_pair(uint32_t bytes, int p, uint32_t d2) {
#ifdef __CUDA_ARCH__
  const uint32_t magic = __byte_perm(bytes, 0x64646464u, p == 0 ? 0x4140u : 0x4342u);
  const __half2 bias = __float2half2_rn(mmq_half_bias<T>());
  const __half2 v = __hmul2(__hsub2(*reinterpret_cast<const __half2*>(&magic), bias),
                            *reinterpret_cast<const __half2*>(&d2));
  return *reinterpret_cast<const uint32_t*>(&v);
#else
  uint32_t out = 0;
  for (int e = 0; e < 2; ++e) {
    const uint32_t b = (bytes >> (8 * (2 * p + e))) & 0xFF;
    const float m = half_to_f32(uint16_t(0x6400u | b));       // 1024 + b
    const float q = m - mmq_half_bias<T>();                    // exact (f16-exact small integer)
    const float d = half_to_f32(uint16_t(e == 0 ? d2 & 0xFFFF : d2 >> 16));
    out |= uint32_t(f32_to_fp16(d * q)) << (16 * e);           // d * q exact in f32, one rounding
  }
  return out;
#endif
}

// mmq_a_fragment by f16 arithmetic (mmq_half_dequant<T>() types): dlo / dhi are the f16 d of rows g and
// g + 8 twice (0 for a unit past the row's last, which makes every value 0). The same f16 values.
template <class T, class U>
POLYKV_HD void mmq_a_fragment_half(const U& lo, const U& hi, int j, uint32_t dlo, uint32_t dhi, uint32_t (&af)[4]) {
  const uint32_t blo = mmq_half_bytes<T>(lo, j), bhi = mmq_half_bytes<T>(hi, j);
  af[0] = mmq_half_pair<T>(blo, 0, dlo);
  af[1] = mmq_half_pair<T>(bhi, 0, dhi);
  af[2] = mmq_half_pair<T>(blo, 1, dlo);
  af[3] = mmq_half_pair<T>(bhi, 1, dhi);
}

// The split words of unit u of a thread's NR rows, loaded from global memory (zeros past a row's last
// unit).
template <class T, int NR>
struct RowUnits {
  uint32_t q[NR][Split<T>::kUnitWords];
  uint32_t h[NR][Split<T>::kHeadWords];
};
template <class T, int NR>
POLYKV_HD void load_row_units(const uint8_t* const (&rows)[NR], const SplitGeom& geom, int64_t u, RowUnits<T, NR>& r) {
  using S = Split<T>;
#pragma unroll
  for (int i = 0; i < NR; ++i) {
    if (u < geom.n_units) {
      split_load_unit<T>(rows[i], geom, u, r.q[i], r.h[i]);
    } else {
#pragma unroll
      for (int k = 0; k < S::kUnitWords; ++k) r.q[i][k] = 0;
#pragma unroll
      for (int k = 0; k < S::kHeadWords; ++k) r.h[i][k] = 0;
    }
  }
}

}  // namespace polykv::cuda::hd

#ifdef __CUDACC__
namespace polykv::cuda::mma {

// d += a * b, m16n8k16, f16 inputs, f32 accumulators (layouts above).
__device__ __forceinline__ void m16n8k16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }

// Four 8x8 f16 matrices from shared memory: lane l gives the address of row l % 8 of matrix l / 8
// (16-byte aligned); register i of lane l holds matrix i's row l / 4, elements 2 (l % 4) and 2 (l % 4) + 1
// (trans: the matrix transposed, i.e. column l / 4, rows 2 (l % 4) and 2 (l % 4) + 1).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

// cp.async of BYTES (4, 8 or 16) bytes from global src to shared dst; !valid: BYTES zeros, nothing read
// (src must still be a valid address). 16 bytes bypass L1 with a 128-byte L2 prefetch hint.
template <int BYTES>
__device__ __forceinline__ void cp_async(void* dst, const void* src, bool valid) {
  const int n = valid ? BYTES : 0;
  if constexpr (BYTES == 16) {
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;" ::"r"(smem_addr(dst)), "l"(src), "r"(n)
                 : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;" ::"r"(smem_addr(dst)), "l"(src), "n"(BYTES), "r"(n)
                 : "memory");
  }
}
// cp_async of a staging piece whose size (4, 8 or 16 bytes) is known only at run time.
__device__ __forceinline__ void cp_async_bytes(void* dst, const void* src, int bytes, bool valid) {
  if (bytes == 16)
    cp_async<16>(dst, src, valid);
  else if (bytes == 8)
    cp_async<8>(dst, src, valid);
  else
    cp_async<4>(dst, src, valid);
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Waits until at most N of this thread's committed groups are in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

// The B fragment (columns g of an n tile) of a quantized mat-mul's k-step: the 4 consecutive f16
// activations of column xcol at pos (8 bytes, read-only path); has = false: zeros, nothing read.
__device__ __forceinline__ void mmq_b_global(const __half* xcol, int64_t pos, bool has, uint32_t (&b)[2]) {
  if (has) {
    const uint2 v = __ldg(reinterpret_cast<const uint2*>(xcol + pos));
    b[0] = v.x;
    b[1] = v.y;
  } else {
    b[0] = b[1] = 0;
  }
}

}  // namespace polykv::cuda::mma
#endif  // __CUDACC__
