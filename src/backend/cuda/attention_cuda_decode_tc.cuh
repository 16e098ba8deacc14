// The tensor-core decode kernel of polykv::cuda::attention (Decode8Kernels::Mma; head sizes 64, 128 and 256, K q8_0
// or a type with a pair table, V q8_0 or a type with a pair table; the pairs it runs: kDecodeTcPairs,
// decode_tc_supports).
// docs/CUDA_ATTENTION.md "Warp-level tensor-core decode" has the counts behind it.
//
// The lanes8 kernel (attention_cuda_decode8.cuh) spends ~130-158 warp instructions per key and KV head, 32 of
// them FMAs no CUDA-core kernel can drop; at 131072 keys it is instruction-bound for every K/V pair. Here both
// products run on mma.sync m16n8k16, and each warp owns 16 keys of every 64-key tile (no work shared between
// warps until the final fold; the block's prologue, early start and fold are decode8's). Tiles reach shared memory
// by one of two pipelines (BULK): decode8's cp.async ring (every thread copies granules; one block barrier per
// tile), or on sm_90 bulk copies issued by one thread and completing on one mbarrier per stage, each warp waiting
// for the tile's barrier and the last warp done with a stage refilling it, so warps never wait for each other:
//
//   S^T = K Q^T   A = 16 keys x 16 dims of K (q8_0: the int8 values, exact in f16; the block scale d is applied
//                 to each 32-dim partial in f32. turbo / trellis: the pair table's f16 pair of levels, one lookup
//                 per A register, the row's norm applied to the 128-dim sum; Q rotated into K's basis by the
//                 prologue), B = 16 dims x 8 columns: columns 0..3 the 4 rows' queries rounded to f16 (hi),
//                 4..7 the rest (lo = q - hi). Score of (key, row r) = C[key][r] + C[key][r + 4]: the query to
//                 ~2^-22, the product exact, the sum in f32.
//   O^T = V^T P   A = 16 dims x 16 keys of V (q8_0: exact int8; turbo / trellis: the pair table's f16 pair of
//                 levels, exact: the levels are f16 values, quant/turbo.h), B = 16 keys x 8 columns: the 4 rows'
//                 probabilities times the key's V scale (q8_0: the block's d, one B per 32-dim block; turbo: the
//                 row's norm), hi in columns 0..3, lo in 4..7. O[r][dim] = C[dim][r] + C[dim][r + 4].
//
// Head size HD (64, 128 or 256): HD / 16 k-steps s of S^T and HD / 16 O^T tiles i. K's dims are permuted so that a
// lane reads 4 consecutive values of a key per k-step s (k = 2t, 2t+1 -> dims qd + 0, +1; k = 2t+8, 2t+9 -> qd + 2,
// +3; Q's B fragment uses the same map): q8_0 qd = 16 s + 4t (inside one 32-dim block per two k-steps); turbo rows
// are NG records of GH dims, each with its norm (GH = turbo_group_of(HD): NG = 1 at head sizes 64 and 128, 2 groups
// of 128 at 256), and since an mma sums its 16 k values before the norm applies, no k-step or O^T tile mixes two
// groups: k-step s = KSG gr + s' of group gr has qd = GH gr + (GH / 4) t + 4 s' (lane t reads pieces (GH / 32) t ..
// + GH / 32 - 1 of each group of its two keys only: 4 at group 128, 2 at 64). V's dims map to the m rows of an O^T
// tile i so that a lane reads one pair of consecutive values of a key: q8_0 (scale per 32 dims, so a tile stays
// within one block) m = g -> dim 16 i + 2g, m = g + 8 -> 16 i + 2g + 1; turbo (one norm per group) tile
// i = NTG gr + i' has m = g -> GH gr + (GH / 8) g + 2i', g + 8 -> +1 (lane g reads pieces (GH / 64) g ..
// + GH / 64 - 1 of each group only: 2g and 2g + 1 at group 128, g at 64), with B's probabilities times the group's
// norm.
//
// Lane (g = lane / 4, t = lane % 4) after the S^T product holds keys 2g, 2g + 1 of its warp's 16 (A rows g and
// g + 8: a key order without shared-memory bank conflicts) and columns 2t,
// 2t+1: rows 2 (t % 2), +1 (t < 2: hi parts, t >= 2: lo parts; one shuffle adds them), the same rows whose O^T
// columns it accumulates, so each lane keeps the running max m and its own sum l of exactly the rows it
// rescales. The probabilities reach the B layout of the second product through 256 bytes of shared memory per
// warp (written by lanes t < 2, read after __syncwarp).
//
// Exactness: every product is exact or within ~2^-22 of f32 (hi/lo splits); the sums are f32 in the tensor
// cores' order, so results differ from lanes8 by f32 rounding (the GPU tests bound them against the CPU
// reference like every other kernel). Rows are independent (column n of an mma uses column n of B only), so
// the batch-invariant plans may run this kernel too.
#pragma once
#include "backend/cuda/attention_cuda_decode8.cuh"
#include "backend/cuda/attention_cuda_mma.cuh"
#include "backend/cuda/attention_cuda_plan.h"

namespace polykv::cuda::attn {
inline namespace POLYKV_ATTN_NS {

namespace tc {

// f16x2 of two bytes of w (each an int8 q xored with 0x80, i.e. q + 128): byte i0 in the low half, i1 in the
// high half, as the exact f16 integers q. Device: PRMT (0x6400 | byte = 1024 + byte) and HSUB2 (- 1152).
template <int I0, int I1>
__device__ __forceinline__ uint32_t q8_pair(uint32_t w) {
#if defined(__CUDA_ARCH__) && !defined(POLYKV_ATTN_EMULATION)
  const uint32_t magic = __byte_perm(w, 0x64646464u, 0x4040u | I0 | (I1 << 8));
  const __half2 v = __hsub2(*reinterpret_cast<const __half2*>(&magic), __float2half2_rn(1152.0f));
  return *reinterpret_cast<const uint32_t*>(&v);
#else
  const uint32_t b0 = (w >> (8 * I0)) & 0xFF, b1 = (w >> (8 * I1)) & 0xFF;
  return pack_halves(to_half_bits(float(int(b0) - 128)), to_half_bits(float(int(b1) - 128)));
#endif
}
// Low halves of x and y (PRMT 0x5410) / high halves (0x7632) as one register, x's in the low half.
__device__ __forceinline__ uint32_t lows(uint32_t x, uint32_t y) {
#if defined(__CUDA_ARCH__) && !defined(POLYKV_ATTN_EMULATION)
  return __byte_perm(x, y, 0x5410u);
#else
  return (x & 0xFFFFu) | (y << 16);
#endif
}
__device__ __forceinline__ uint32_t highs(uint32_t x, uint32_t y) {
#if defined(__CUDA_ARCH__) && !defined(POLYKV_ATTN_EMULATION)
  return __byte_perm(x, y, 0x7632u);
#else
  return (x >> 16) | (y & 0xFFFF0000u);
#endif
}
// f16x2 of the low (HI false) or high (HI true) nibbles of bytes I0 (low half) and I1 (high half) of w, each a
// q4_0 value n (0 .. 15) as the exact f16 n - 8. Device: PRMT (the two bytes into the halves), LOP3 (the nibble
// under 0x6400: 1024 + n, or 1024 + 16 n) and HSUB2 (- 1032) or HFMA2 (x / 16 - 72: exact, one rounding).
template <int I0, int I1, bool HI>
__device__ __forceinline__ uint32_t q4_pair(uint32_t w) {
#if defined(__CUDA_ARCH__) && !defined(POLYKV_ATTN_EMULATION)
  const uint32_t spread = __byte_perm(w, 0u, 0x4040u | I0 | (I1 << 8));  // [byte I0, 0, byte I1, 0]
  if constexpr (HI) {
    const uint32_t m = (spread & 0x00F000F0u) | 0x64006400u;
    const __half2 v = __hfma2(*reinterpret_cast<const __half2*>(&m), __float2half2_rn(0.0625f),
                              __float2half2_rn(-72.0f));
    return *reinterpret_cast<const uint32_t*>(&v);
  } else {
    const uint32_t m = (spread & 0x000F000Fu) | 0x64006400u;
    const __half2 v = __hsub2(*reinterpret_cast<const __half2*>(&m), __float2half2_rn(1032.0f));
    return *reinterpret_cast<const uint32_t*>(&v);
  }
#else
  const uint32_t b0 = (w >> (8 * I0)) & 0xFF, b1 = (w >> (8 * I1)) & 0xFF;
  const uint32_t n0 = HI ? b0 >> 4 : b0 & 15u, n1 = HI ? b1 >> 4 : b1 & 15u;
  return pack_halves(to_half_bits(float(int(n0) - 8)), to_half_bits(float(int(n1) - 8)));
#endif
}
// The two 32-bit words at p (8-byte aligned on the device: f16 rows start 16-byte aligned in the stages).
__device__ __forceinline__ void ld_pair(const uint8_t* p, uint32_t& w0, uint32_t& w1) {
#if defined(__CUDA_ARCH__) && !defined(POLYKV_ATTN_EMULATION)
  const uint2 v = *reinterpret_cast<const uint2*>(p);
  w0 = v.x;
  w1 = v.y;
#else
  w0 = ld_u32(p);
  w1 = ld_u32(p + 4);
#endif
}
// The 32-bit word at p (4-byte aligned on the device).
__device__ __forceinline__ uint32_t ld_word(const uint8_t* p) {
#if defined(__CUDA_ARCH__) && !defined(POLYKV_ATTN_EMULATION)
  return *reinterpret_cast<const uint32_t*>(p);
#else
  return ld_u32(p);
#endif
}

// The 4 bytes of q4_0 K at byte offset off (as q8_quad, without the xor).
__device__ __forceinline__ uint32_t q4_quad(const uint8_t* p, bool aligned) {
  if (aligned) return ld_word(p);
  else return ld_u16(p) | (ld_u16(p + 2) << 16);
}
// The 4 int8 of q8_0 K at byte offset off (= 2 mod 4 for blocks 0 and 2 of a row, 0 mod 4 for 1 and 3; rows
// are 8-byte aligned in the stages) as one word, xored with 0x80808080: one 32-bit load where aligned.
// (aligned: a constant after unrolling.)
__device__ __forceinline__ uint32_t q8_quad(const uint8_t* p, bool aligned) {
  if (aligned) return ld_word(p) ^ 0x80808080u;
  else return (ld_u16(p) | (ld_u16(p + 2) << 16)) ^ 0x80808080u;
}

// stage_copy (attention_cuda_decode.cuh: bytes [src, src + len) to dst + (src mod 16), whole 16-byte granules)
// with 32-bit shared addresses and pointers advanced by the loop instead of recomputed per granule.
__device__ __forceinline__ void stage_copy(uint8_t* dst, const uint8_t* src, int len) {
#if defined(POLYKV_ATTN_EMULATION)
  attn::stage_copy(dst, src, size_t(len));
#else
  const uint32_t mis = uint32_t(reinterpret_cast<uintptr_t>(src) & 15u);
  const int n = int((mis + uint32_t(len) + 15u) >> 4);
  const uint8_t* g = src - mis + 16 * threadIdx.x;
  uint32_t d = mma::smem_addr(dst) + 16u * threadIdx.x;
  for (int i = threadIdx.x; i < n; i += kThreads, g += 16 * kThreads, d += 16u * kThreads)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(g) : "memory");
#endif
}

// stage_copy of `rows` rows of row_bytes (a multiple of 16) from src, row r to dst + r * stride + (src mod 16): the
// padded stages of f16 rows (decode_tc_padded), by every thread of the block.
__device__ __forceinline__ void stage_copy_rows(uint8_t* dst, const uint8_t* src, int rows, int row_bytes, int stride) {
#if defined(POLYKV_ATTN_EMULATION)
  for (int r = 0; r < rows; ++r) attn::stage_copy(dst + r * stride, src + r * row_bytes, size_t(row_bytes));
#else
  const uint32_t mis = uint32_t(reinterpret_cast<uintptr_t>(src) & 15u);
  const int per = int((mis + uint32_t(row_bytes) + 15u) >> 4), n = rows * per;
  const uint8_t* g = src - mis;
  for (int i = threadIdx.x; i < n; i += kThreads) {
    const int r = i / per, c = i - r * per;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(mma::smem_addr(dst + r * stride + 16 * c)),
                 "l"(g + size_t(r) * row_bytes + 16 * c)
                 : "memory");
  }
#endif
}
// The bulk pipeline (BULK = 1, sm_90): one mbarrier per stage (arrival count 1: the issuing thread's
// arrive.expect_tx; the stage's two bulk copies complete its transaction bytes), waited on by parity.
// The emulation keeps the barrier in the same 64 bits (tx bytes pending, arrivals pending, count, phase) and
// copies at once, so a barrier's phase completes when its tile is issued.
__device__ __forceinline__ void bar_init(uint64_t* bar, uint32_t count) {
#if defined(POLYKV_ATTN_EMULATION)
  *bar = (uint64_t(count) << 32) | (uint64_t(count) << 48);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(mma::smem_addr(bar)), "r"(count) : "memory");
#else
  (void)bar, (void)count;
#endif
}
// Makes the initialized barriers visible to the bulk copies' completions.
__device__ __forceinline__ void bar_init_fence() {
#if !defined(POLYKV_ATTN_EMULATION) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}
#if defined(POLYKV_ATTN_EMULATION)
inline void emu_bar_settle(uint64_t* bar) {  // completes the phase when nothing is pending
  const uint64_t v = *bar;
  if ((v & 0xFFFFFFFFu) == 0 && ((v >> 32) & 0xFFFFu) == 0) {
    const uint64_t count = (v >> 48) & 0x7FFFu, phase = (v >> 63) ^ 1u;
    *bar = (count << 32) | (count << 48) | (phase << 63);
  }
}
#endif
// One arrival that also expects `bytes` more transaction bytes in the current phase.
__device__ __forceinline__ void bar_arrive_expect(uint64_t* bar, uint32_t bytes) {
#if defined(POLYKV_ATTN_EMULATION)
  *bar = *bar + bytes - (uint64_t(1) << 32);
  emu_bar_settle(bar);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(mma::smem_addr(bar)), "r"(bytes)
               : "memory");
#else
  (void)bar, (void)bytes;
#endif
}
// Bytes [src, src + len) to dst + (src mod 16) (dst 16-byte aligned) by one bulk copy of the aligned granules
// covering them (as stage_copy: their other bytes lie in the same granules of the pool's allocation), completing
// on bar; returns the bytes copied (the transaction count). Issued by one thread.
__device__ __forceinline__ uint32_t bulk_bytes(const uint8_t* src, int len) {
  const uint32_t mis = uint32_t(reinterpret_cast<uintptr_t>(src) & 15u);
  return (mis + uint32_t(len) + 15u) & ~15u;
}
__device__ __forceinline__ void bulk_copy(uint8_t* dst, const uint8_t* src, int len, uint64_t* bar) {
  const uint32_t mis = uint32_t(reinterpret_cast<uintptr_t>(src) & 15u);
#if defined(POLYKV_ATTN_EMULATION)
  std::memcpy(dst + mis, src, size_t(len));  // the range only (the host's buffers end where the rows do)
  *bar -= bulk_bytes(src, len);
  emu_bar_settle(bar);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
          mma::smem_addr(dst)),
      "l"(src - mis), "r"(bulk_bytes(src, len)), "r"(mma::smem_addr(bar))
      : "memory");
#else
  (void)dst, (void)src, (void)len, (void)bar, (void)mis;
#endif
}
// Waits until the phase of parity `parity` of bar has completed.
__device__ __forceinline__ void bar_wait(uint64_t* bar, uint32_t parity) {
#if defined(POLYKV_ATTN_EMULATION)
  while (uint32_t(*bar >> 63) == parity) POLYKV_EMU_YIELD();
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const uint32_t addr = mma::smem_addr(bar);
  uint32_t done = 0;
  do {
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(addr), "r"(parity)
        : "memory");
  } while (!done);
#else
  (void)bar, (void)parity;
#endif
}
// The old value of *p, incremented (shared memory, block scope).
__device__ __forceinline__ int shared_fetch_inc(int* p) {
#if defined(POLYKV_ATTN_EMULATION)
  return (*p)++;
#else
  return atomicAdd(p, 1);
#endif
}
// Piece c (values 8c .. 8c + 7) of a turbo / trellis record rec of HD values (one group of a row): its bits as
// decode8s_pairs reads them. Trellis: x = the 11 window bits (t_{8c-3} .. t_{8c+7}), js = the index bits; turbo:
// x = the index bits, js = 0.
template <KvType T, int HD>
__device__ __forceinline__ void piece_bits(const uint8_t* rec, int c, uint32_t& x, uint32_t& js) {
  if constexpr (kv_trellis_bits(T) != 0) {
    constexpr int nb = kv_trellis_bits(T) - 1;
    const uint8_t* tb = rec + 2;
    const uint32_t prev = c > 0 ? ld_u8(tb + c - 1) >> 5 : 0u;
    x = prev | (ld_u8(tb + c) << 3);
    const uint8_t* jb = rec + 2 + HD / 8 + nb * c;
    if constexpr (nb == 1) js = ld_u8(jb);
    else js = ld_u16(jb);
  } else {
    constexpr int bb = kv_turbo_bits(T);
    const uint8_t* ib = rec + 2 + bb * c;
    if constexpr (bb == 2) x = ld_u16(ib);
    else if constexpr (bb == 4) x = ld_u32(ib);
    else x = ld_u8(ib) | (ld_u8(ib + 1) << 8) | (ld_u8(ib + 2) << 16);
    js = 0;
  }
}
// piece_bits of the N (2 or 4) consecutive pieces N q .. N q + N - 1 of a row (turbo K: lane t's pieces, q = t).
// Trellis rows are 2-byte aligned in the stages (records of even size), so their window bytes N q - 1 .. N q + N - 1
// come in N / 2 + 1 16-bit loads (one fewer for q = 0) and each piece's x is one shift of them (pair_off reads bits
// 0 .. 10 of x only).
template <KvType T, int HD, int N>
__device__ __forceinline__ void piece_bits_run(const uint8_t* rec, int q, uint32_t (&x)[N], uint32_t (&js)[N]) {
  static_assert(N == 2 || N == 4, "pieces a lane reads");
  if constexpr (kv_trellis_bits(T) != 0) {
    constexpr int nb = kv_trellis_bits(T) - 1;
    const uint8_t* tb = rec + 2 + N * q;  // window bytes of pieces N q .. N q + N - 1
    uint32_t w = ld_u16(tb);
    if constexpr (N == 4) w |= ld_u16(tb + 2) << 16;
    const uint32_t prev = q > 0 ? ld_u16(tb - 2) >> 13 : 0u;  // bits 5..7 of byte N q - 1
    x[0] = prev | (w << 3);
#pragma unroll
    for (int p = 1; p < N; ++p) x[p] = w >> (8 * p - 3);
#pragma unroll
    for (int p = 0; p < N; ++p) {
      const uint8_t* jb = rec + 2 + HD / 8 + nb * (N * q + p);
      if constexpr (nb == 1) js[p] = ld_u8(jb);
      else js[p] = ld_u16(jb);
    }
  } else {
#pragma unroll
    for (int p = 0; p < N; ++p) piece_bits<T, HD>(rec, N * q + p, x[p], js[p]);
  }
}
// The byte offset of pair M of a piece (piece_bits' x, js) in a table of f16 pairs (4-byte entries).
template <KvType T, int M>
__device__ __forceinline__ uint32_t pair_off(uint32_t x, uint32_t js) {
  if constexpr (kv_trellis_bits(T) != 0) return trellis_pair_off<kv_trellis_bits(T) - 1, M, 2>(x, js);
  else return turbo_pair_off<kv_turbo_bits(T), M, 2>(x);
}
// The f16 pair at byte offset off (a multiple of 4) of a pair table.
__device__ __forceinline__ uint32_t pair_word(const uint32_t* table, uint32_t off) {
  return *reinterpret_cast<const uint32_t*>(reinterpret_cast<const uint8_t*>(table) + off);
}

// A block-scope memory fence.
__device__ __forceinline__ void fence_block() {
#if !defined(POLYKV_ATTN_EMULATION)
  __threadfence_block();
#endif
}

}  // namespace tc

// KTI / VTI: the K / V KvType (decode_tc_supports); HD: the head size (64, 128 or 256, decode_tc_head). Launch bound
// (decode_tc_min_blocks): 4 blocks per multiprocessor (<= 128 registers) at head sizes 64 and 128, like the
// specialized lanes8 kernels, so the plan's one-wave splits hold; 3 at 256 (its 16 k-steps of Q fragments and 16
// O^T tiles take ~130 registers; two stages of q8_0 rows take 68 KB).
// BULK: the tile pipeline (decode_tc_bulk): 1 bulk copies and mbarriers (sm_90; below, the cp.async ring), 0 the
// cp.async ring with one block barrier per tile.
template <int KTI, int VTI, int BULK, int HD = 128>
__global__ void __launch_bounds__(kThreads, HD == 256 ? kDecodeTc256MinBlocks : kDecode8FixedMinBlocks)
    decode_tc_kernel(const Args a) {
  static_assert(HD == 64 || HD == 128 || HD == 256, "head sizes 64, 128 and 256 (decode_tc_head)");
  constexpr int R = kDecodeRows, LD = HD + 4, TK = kDecodeTcTileKeys, NW = kThreads / 32;
  // k-steps of S^T and O^T tiles (16 dims each), 32-dim blocks of q8_0 / q4_0 rows. Turbo rows: NG groups of GH
  // dims (a record with its norm each: one at head sizes 64 and 128, two of 128 at 256), so KSG k-steps and NTG O^T
  // tiles a group, PK turbo K pieces a group per lane t and PV turbo V pieces a group per lane g.
  constexpr int KS = HD / 16, NT = HD / 16, NB = HD / 32;
  constexpr int GH = turbo_group_of(HD), NG = HD / GH, KSG = GH / 16, NTG = GH / 16;
  constexpr int PK = GH / 32, PV = GH / 64;
  constexpr KvType KT = KvType(KTI), VT = KvType(VTI);
  static_assert(R == 4 && TK == 16 * NW, "the layout above");
  constexpr bool kBlockK = KT == KvType::Q8_0 || KT == KvType::Q4_0;  // 32-value blocks with an f16 scale
  constexpr bool kBlockV = VT == KvType::Q8_0 || VT == KvType::Q4_0;
  // f16 rows (f16/f16 only): the values are the fragments, no scale; staged on padded rows (decode_tc_padded).
  constexpr bool kHalf = KT == KvType::F16;
  static_assert(kHalf == (VT == KvType::F16), "f16 K with f16 V only");
  static_assert(kBlockK || kHalf || pair_lut_size(KT) > 0, "K: q8_0, q4_0, f16 or a type with a pair table");
  static_assert(kBlockV || kHalf || pair_lut_size(VT) > 0, "V: q8_0, q4_0, f16 or a type with a pair table");
  // K's dims on the turbo map (lane t owns dims (GH / 4) t .. + GH / 4 - 1 of each group)
  constexpr bool kTurboK = !kBlockK && !kHalf;
  // V's dims on the turbo map (lane g owns dims (GH / 8) g .. + GH / 8 - 1 of each group)
  constexpr bool kTurboV = !kBlockV && !kHalf;
  constexpr int kBlkK = KT == KvType::Q4_0 ? 18 : 34;  // K block bytes (q8_0, q4_0)
  constexpr int kPairs = kTurboV ? pair_lut_size(VT) : 1;
  // Turbo K of V's type reads V's table (the same entries: the same type's levels); another type its own.
  constexpr bool kOwnKPairs = kTurboK && KT != VT;
  constexpr int kKPairs = kOwnKPairs ? pair_lut_size(KT) : 1;
  constexpr size_t krb = kv_row_bytes_const(KT, HD), vrb = kv_row_bytes_const(VT, HD);
  constexpr size_t krec = krb / NG, vrec = vrb / NG;  // turbo: bytes of one group's record
  // Bytes between staged rows (decode_stage_row, decode_tc_padded: f16 rows kDecodeTcRowPad apart more than their size).
  constexpr size_t krs = kHalf ? krb + kDecodeTcRowPad : krb, vrs = kHalf ? vrb + kDecodeTcRowPad : vrb;
#if defined(POLYKV_ATTN_EMULATION) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900)
  constexpr bool kBulk = BULK != 0;
#else
  constexpr bool kBulk = false;
#endif

  const bool early = a.early != 0;
  Work w;
  int kb, ke;
  if (!decode_block_begin(a, w, kb, ke)) return;
  const int new_lo = early ? w.pos_a - w.qa : 0x7fffffff;
  bool waited = !early;

  __shared__ __align__(16) float Qs[R * LD];  // queries, then the block's outputs
  __shared__ int qhi[R], qlo[R], qrow[R];
  __shared__ float lvk[32], lvv[32];
  __shared__ uint32_t vpair[kPairs];  // turbo V: entry i = the f16 pair of pair_lut_entry i (exact: f16 levels)
  __shared__ uint32_t kpair_own[kKPairs];  // turbo K of a type other than V's: its pair table, as vpair
  __shared__ __align__(16) float pex[NW][R][16];  // per warp: the tile's probabilities [row][key]
  __shared__ float wgt[NW * R];
  __shared__ int st_t0[kDecodeMaxStages], st_nk[kDecodeMaxStages], st_ko[kDecodeMaxStages], st_vo[kDecodeMaxStages];
  // Bulk pipeline: full[s] completes a phase when stage s's tile has landed; released[s] counts the warps done with
  // it (the last one refills it); p_next = the producer's (next key, its pool block, the block's end), advanced by
  // each refill (refills run in tile order: the last warp done with tile i + 1 finished tile i's refill first).
  __shared__ __align__(8) uint64_t full[kBulk ? kDecodeMaxStages : 1];
  __shared__ int released[kBulk ? kDecodeMaxStages : 1], p_next[3];
  // Padded rows: a refill is one bulk copy a row, issued by the whole warp; its lane 0 plans the tile and passes
  // (rows, K source, V source) through here (refills never overlap: see above).
  __shared__ const uint8_t* bc_src[2];
  __shared__ int bc_nk;
  POLYKV_DYNAMIC_SHARED(smem4);
  uint8_t* stages = reinterpret_cast<uint8_t*>(smem4);
  const size_t kpart = a.stage_k_bytes, spart = a.stage_bytes;
  const int S = a.stages;
  float* st_acc = reinterpret_cast<float*>(smem4);  // after the tiles: [NW][R][HD]
  float* st_ml = st_acc + NW * R * HD;              // [NW][R][2]

  const int32_t* table = a.tables + a.table_start[w.seq];
  const int bt = a.block_tokens;
  const size_t head_row = size_t(w.g) * size_t(bt);
  // The next tile from key pk of pool block bi (ending at key bend; pk < ke): its keys [pk, returned end) and the
  // addresses of its K and V rows; advances (bi, bend) past a finished pool block (a tile never crosses one).
  // Waits for the previous grid before the first tile that reaches the keys it may still be writing.
  const auto next_tile = [&](int pk, int& bi, int& bend, const uint8_t*& ks, const uint8_t*& vs) {
    if (pk >= bend) {
      ++bi;
      bend += bt;
    }
    const int t1 = min(min(pk + TK, ke), bend);
    if (!waited && t1 > new_lo) {
      pdl_wait_prev();
      waited = true;
    }
    const uint8_t* base = a.base + size_t(table[bi]) * a.block_stride;
    const size_t row = head_row + size_t(pk - bi * bt);
    ks = base + row * krb;
    vs = base + a.v_offset + row * vrb;
    return t1;
  };
  const auto note_stage = [&](int st, int pk, int nk, const uint8_t* ks, const uint8_t* vs) {
    st_t0[st] = pk;
    st_nk[st] = nk;
    st_ko[st] = int(reinterpret_cast<uintptr_t>(ks) & 15u);
    st_vo[st] = int(reinterpret_cast<uintptr_t>(vs) & 15u);
  };
  // The cp.async producer, run by every thread: decode8's incremental one, one commit group per call.
  int p_key = kb, p_bi = kb / bt, p_bend = (p_bi + 1) * bt, p_st = 0;
  const auto issue = [&]() {
    if (p_key < ke) {
      const uint8_t *ks, *vs;
      const int t1 = next_tile(p_key, p_bi, p_bend, ks, vs), nk = t1 - p_key;
      uint8_t* dst = stages + size_t(p_st) * spart;
      if constexpr (kHalf) {
        tc::stage_copy_rows(dst, ks, nk, int(krb), int(krs));
        tc::stage_copy_rows(dst + kpart, vs, nk, int(vrb), int(vrs));
      } else {
        tc::stage_copy(dst, ks, nk * int(krb));
        tc::stage_copy(dst + kpart, vs, nk * int(vrb));
      }
      if (threadIdx.x == 0) note_stage(p_st, p_key, nk, ks, vs);
      p_key = t1;
    }
    p_st = p_st + 1 == S ? 0 : p_st + 1;
    stage_commit();
  };
  // The bulk producers' first step, run by one thread: the next tile (from p_next) planned into stage st, its bounds
  // noted, p_next advanced; returns its keys (0: none left) and sets its K and V sources.
  const auto claim_tile = [&](int st, const uint8_t*& ks, const uint8_t*& vs) {
    const int pk = p_next[0];
    if (pk >= ke) return 0;
    int bi = p_next[1], bend = p_next[2];
    const int t1 = next_tile(pk, bi, bend, ks, vs), nk = t1 - pk;
    note_stage(st, pk, nk, ks, vs);
    p_next[0] = t1;
    p_next[1] = bi;
    p_next[2] = bend;
    return nk;
  };
  // The barriers and the producer's state, by thread 0 before any stage is issued.
  const auto bulk_init = [&]() {
    for (int st = 0; st < S; ++st) {
      tc::bar_init(&full[st], 1);
      released[st] = 0;
    }
    tc::bar_init_fence();
    p_next[0] = kb;
    p_next[1] = kb / bt;
    p_next[2] = (kb / bt + 1) * bt;
  };
  // The bulk producer, run by one thread: the next tile into stage st (nothing past ke); its state is p_next.
  const auto issue_bulk = [&](int st) {
    const uint8_t *ks, *vs;
    const int nk = claim_tile(st, ks, vs);
    if (nk == 0) return;
    uint8_t* dst = stages + size_t(st) * spart;
    // The arrival (release) orders the stores above before any consumer's wait (acquire) returns.
    tc::bar_arrive_expect(&full[st], tc::bulk_bytes(ks, nk * int(krb)) + tc::bulk_bytes(vs, nk * int(vrb)));
    tc::bulk_copy(dst, ks, nk * int(krb), &full[st]);
    tc::bulk_copy(dst + kpart, vs, nk * int(vrb), &full[st]);
  };
  // The bulk producer of padded rows, run by a whole warp: lane 0 plans the next tile into stage st as issue_bulk does
  // and arrives with its bytes, then each lane copies rows lane, lane + 32 of K and of V, one bulk copy a row.
  const auto issue_bulk_rows = [&](int st) {
    if ((threadIdx.x & 31) == 0) {
      const uint8_t *ks = nullptr, *vs = nullptr;
      const int nk = claim_tile(st, ks, vs);
      bc_nk = nk;
      if (nk > 0) {
        bc_src[0] = ks;
        bc_src[1] = vs;
        tc::bar_arrive_expect(&full[st], uint32_t(nk) * (tc::bulk_bytes(ks, int(krb)) + tc::bulk_bytes(vs, int(vrb))));
      }
    }
    __syncwarp();
    const int nk = bc_nk;
    const uint8_t *ks = bc_src[0], *vs = bc_src[1];
    uint8_t* dst = stages + size_t(st) * spart;
    for (int r = threadIdx.x & 31; r < nk; r += 32) {
      tc::bulk_copy(dst + size_t(r) * krs, ks + size_t(r) * krb, int(krb), &full[st]);
      tc::bulk_copy(dst + kpart + size_t(r) * vrs, vs + size_t(r) * vrb, int(vrb), &full[st]);
    }
    __syncwarp();  // every lane has read bc_* before the next refill plans
  };
  if constexpr (kBulk && kHalf) {
    if (threadIdx.x < 32) {  // warp 0 fills every stage; the others first touch the barriers after the prologue's
      if (threadIdx.x == 0) bulk_init();
      __syncwarp();
      for (int st = 0; st < S; ++st) issue_bulk_rows(st);
    }
  } else if constexpr (kBulk) {
    if (threadIdx.x == 0) {  // the others first touch the barriers after block_prologue's barrier
      bulk_init();
      for (int st = 0; st < S; ++st) issue_bulk(st);  // every stage in flight (no stage is being read yet)
    }
  } else {
    for (int i = 0; i < S - 1; ++i) issue();
  }

  block_prologue<HD>(a, w, R, Qs, LD, qhi, qlo, qrow, lvk, lvv);
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int g = lane / 4, t = lane % 4;
  const int r0 = 2 * (t & 1);  // this lane's rows r0, r0 + 1 (scores, m, l, O^T columns)
  if constexpr (kTurboV) {
    const uint32_t subset_word = g_tables.subset_word;
    for (int i = tid; i < kPairs; i += kThreads) {  // read after the first tile's barrier
      float x0, x1;
      pair_lut_entry(VT, lvv, subset_word, i, x0, x1);
      vpair[i] = pack_halves(to_half_bits(x0), to_half_bits(x1));
    }
  }
  if constexpr (kOwnKPairs) {
    const uint32_t subset_word = g_tables.subset_word;
    for (int i = tid; i < kKPairs; i += kThreads) {
      float x0, x1;
      pair_lut_entry(KT, lvk, subset_word, i, x0, x1);
      kpair_own[i] = pack_halves(to_half_bits(x0), to_half_bits(x1));
    }
  }
  // The tables are read by every warp right after its first tile's wait, and the bulk pipeline has no block
  // barrier per tile: one barrier here (before, turbo V read vpair first after the K products and softmax, which
  // kept the race with the last warps' fills unobserved, not impossible).
  if constexpr (kTurboV || kOwnKPairs) __syncthreads();
  const uint32_t* const kpair = kOwnKPairs ? kpair_own : vpair;
  // Q^T as B fragments of the KS k-steps: column g = row g % 4, hi (g < 4) or lo; k = 2t + 8j, +1 -> dims
  // qd(s) + 2j, +1 with qd(s) = 16 s + 4t (q8_0 K) or GH (s / KSG) + (GH / 4) t + 4 (s % KSG) (turbo K: the lane's
  // PK pieces of group s / KSG).
  uint32_t qb[KS][2];
  {
    const float* qr = Qs + (g & 3) * LD;
#pragma unroll
    for (int s = 0; s < KS; ++s)
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int d = (kTurboK ? GH * (s / KSG) + (GH / 4) * t + 4 * (s % KSG) : 16 * s + 4 * t) + 2 * j;
        uint32_t hi, lo;
        split_pair(qr[d], qr[d + 1], hi, lo);
        qb[s][j] = g < 4 ? hi : lo;
      }
  }
  const int qh0 = qhi[r0], qh1 = qhi[r0 + 1], ql0 = qlo[r0], ql1 = qlo[r0 + 1];
  // Keys [seen_lo, seen_hi] are visible to every row of the block (empty when a row is missing: qlo = INT_MAX).
  int seen_lo = qlo[0], seen_hi = qhi[0];
#pragma unroll
  for (int r = 1; r < R; ++r) {
    seen_lo = max(seen_lo, qlo[r]);
    seen_hi = min(seen_hi, qhi[r]);
  }

  float oacc[NT][4];  // O^T tiles: (dim of m = g / g + 8, column 2t / 2t + 1)
#pragma unroll
  for (int i = 0; i < NT; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) oacc[i][e] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

  uint32_t parity = 0;  // bulk: the phase parity of the current stage's barrier (flips as the ring wraps)
  for (int c_st = 0, key = kb; key < ke;) {
    if constexpr (kBulk) {
      tc::bar_wait(&full[c_st], parity);
    } else {
      stage_wait(S - 2);
      __syncthreads();
      issue();
    }
    const int t0 = st_t0[c_st], nk = st_nk[c_st];
    key = t0 + nk;
    const int i0 = 16 * warp;  // this warp's first key in the tile
    if (i0 < nk) {             // warp-uniform: a short last tile leaves some warps without keys
      const uint8_t* kbuf = stages + size_t(c_st) * spart + st_ko[c_st] + size_t(i0) * krs;
      const uint8_t* vbuf = stages + size_t(c_st) * spart + kpart + st_vo[c_st] + size_t(i0) * vrs;

      // ---- S^T = K Q^T (q8_0 / q4_0 K: per 32-dim block, then times the key's d; turbo K: times the row's norm) ----
      float sc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      if constexpr (kHalf) {
        // Keys 2g (A row g) and 2g + 1 (row g + 8); k-step s: dims 16 s + 4t .. +3 of each, one 8-byte load a key
        // (the q8_0 map). Rows 16 bytes apart more than their 2 HD bytes: lane (g, t) of a half-warp reads banks
        // 8g + 2t, +1 (key 2g) or those + 4 (key 2g + 1), all different.
        const uint8_t* ka = kbuf + size_t(2 * g) * krs + 8 * t;
        const uint8_t* kc = ka + krs;
#pragma unroll
        for (int s = 0; s < KS; ++s) {
          uint32_t a0, a2, c0, c2;
          tc::ld_pair(ka + 32 * s, a0, a2);
          tc::ld_pair(kc + 32 * s, c0, c2);
          const uint32_t af[4] = {a0, c0, a2, c2};
          mma16816(sc, af, qb[s]);
        }
      } else if constexpr (kTurboK) {
        // Keys 2g (A row g) and 2g + 1 (row g + 8), group by group (no k-step mixes two groups' norms): k-step
        // s = KSG gr + s' takes pairs 2 (s' & 1), +1 of the lane's piece PK t + s' / 2 of each key's group gr: dims
        // GH gr + (GH / 4) t + 4 s' .. +3, as qb.
#pragma unroll
        for (int gr = 0; gr < NG; ++gr) {
          const uint8_t* kr[2] = {kbuf + size_t(2 * g) * krs + gr * krec, kbuf + size_t(2 * g + 1) * krs + gr * krec};
          uint32_t px[2][PK], pj[2][PK];
#pragma unroll
          for (int u = 0; u < 2; ++u) tc::piece_bits_run<KT, GH, PK>(kr[u], t, px[u], pj[u]);
          float cb[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
          for (int s = 0; s < KSG; ++s) {
            const int pc = s >> 1;
            uint32_t e[2][2];  // [key][pair 2 (s & 1) + h]
#pragma unroll
            for (int u = 0; u < 2; ++u) {
              if (s & 1) {
                e[u][0] = tc::pair_word(kpair, tc::pair_off<KT, 2>(px[u][pc], pj[u][pc]));
                e[u][1] = tc::pair_word(kpair, tc::pair_off<KT, 3>(px[u][pc], pj[u][pc]));
              } else {
                e[u][0] = tc::pair_word(kpair, tc::pair_off<KT, 0>(px[u][pc], pj[u][pc]));
                e[u][1] = tc::pair_word(kpair, tc::pair_off<KT, 1>(px[u][pc], pj[u][pc]));
              }
            }
            const uint32_t af[4] = {e[0][0], e[1][0], e[0][1], e[1][1]};
            mma16816(cb, af, qb[KSG * gr + s]);
          }
          const float na = half_to_float(ld_u16(kr[0])), nc = half_to_float(ld_u16(kr[1]));
          sc[0] += na * cb[0];
          sc[1] += na * cb[1];
          sc[2] += nc * cb[2];
          sc[3] += nc * cb[3];
        }
      } else {
        // Row g of the A fragment is key 2g, row g + 8 key 2g + 1: at head size 128 q8_0 rows are 136 bytes (34
        // words) apart, so lane (g, t) reads bank (68 g + t) mod 32 = 4g + t (+ 2 for the odd key): no two lanes of a
        // load share a bank (keys g and g + 1 would: 2g + t). q4_0 rows are 72 bytes apart: bank (36 g + t) mod 32,
        // the same. At head size 64 (68- and 36-byte rows: banks 2g + t and 18 g + t) some pairs of lanes share a bank.
        const uint8_t* ka = kbuf + size_t(2 * g) * krs;  // key 2g
        const uint8_t* kc = ka + krs;                    // key 2g + 1
#pragma unroll
        for (int b = 0; b < NB; ++b) {
          float cb[4] = {0.0f, 0.0f, 0.0f, 0.0f};
          if constexpr (KT == KvType::Q8_0) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int off = 34 * b + 2 + 16 * h + 4 * t;  // dims 32 b + 16 h + 4t .. +3
              const uint32_t wa = tc::q8_quad(ka + off, (b & 1) != 0), wc = tc::q8_quad(kc + off, (b & 1) != 0);
              const uint32_t af[4] = {tc::q8_pair<0, 1>(wa), tc::q8_pair<0, 1>(wc), tc::q8_pair<2, 3>(wa),
                                      tc::q8_pair<2, 3>(wc)};
              mma16816(cb, af, qb[2 * b + h]);
            }
          } else {  // q4_0: bytes 4t .. 4t + 3 of the block hold dims 4t .. +3 (low nibbles) and 16 + 4t .. (high)
            const int off = 18 * b + 2 + 4 * t;  // rows 8-byte aligned in the stages: 4-byte aligned for odd b
            const uint32_t wa = tc::q4_quad(ka + off, (b & 1) != 0), wc = tc::q4_quad(kc + off, (b & 1) != 0);
            const uint32_t a0[4] = {tc::q4_pair<0, 1, false>(wa), tc::q4_pair<0, 1, false>(wc),
                                    tc::q4_pair<2, 3, false>(wa), tc::q4_pair<2, 3, false>(wc)};
            mma16816(cb, a0, qb[2 * b]);
            const uint32_t a1[4] = {tc::q4_pair<0, 1, true>(wa), tc::q4_pair<0, 1, true>(wc),
                                    tc::q4_pair<2, 3, true>(wa), tc::q4_pair<2, 3, true>(wc)};
            mma16816(cb, a1, qb[2 * b + 1]);
          }
          const float da = half_to_float(ld_u16(ka + kBlkK * b)), dc = half_to_float(ld_u16(kc + kBlkK * b));
          sc[0] += da * cb[0];
          sc[1] += da * cb[1];
          sc[2] += dc * cb[2];
          sc[3] += dc * cb[3];
        }
      }  // q8_0 / q4_0 K
      // Full scores (hi + lo columns), softcap, masks: x[e], key 2g (e < 2) or 2g + 1, row r0 + (e & 1). The masks
      // only where some key of the warp's 16 is past the tile or outside some row's visible range (warp-uniform).
      float x[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float v = sc[e] + __shfl_xor_sync(0xffffffffu, sc[e], 2);
        if (a.softcap > 0.0f) v = a.softcap * tanhf(v / a.softcap);
        x[e] = v;
      }
      if (!(i0 + 16 <= nk && t0 + i0 >= seen_lo && t0 + i0 + 15 <= seen_hi))
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int ki = i0 + 2 * g + (e >> 1), pos = t0 + ki;
          const bool ok = ki < nk && ((e & 1) ? pos <= qh1 && pos >= ql1 : pos <= qh0 && pos >= ql0);
          if (!ok) x[e] = -INFINITY;
        }
      float p[4], alpha[2];
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        float mt = fmaxf(x[j], x[j + 2]);
#pragma unroll
        for (int o = 4; o < 32; o *= 2) mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, o));
        const float m_new = fmaxf(m[j], mt);
        alpha[j] = m_new == -INFINITY ? 1.0f : fast_exp(m[j] - m_new);
        p[j] = m_new == -INFINITY ? 0.0f : fast_exp(x[j] - m_new);
        p[j + 2] = m_new == -INFINITY ? 0.0f : fast_exp(x[j + 2] - m_new);
        m[j] = m_new;
        l[j] = l[j] * alpha[j] + (p[j] + p[j + 2]);
      }
      // Rescale only when some row's max grew (rare past the first tiles at long depth). Every lane holds the same
      // m for its rows as the other lanes of its t % 2 (the g butterfly; lanes t and t ^ 2 agree), and lane ^ 1 holds
      // the other two rows: one shuffle makes the condition warp-uniform, so it can be a branch, not 32 predicated
      // multiplies per lane and tile.
      float grew = (alpha[0] != 1.0f || alpha[1] != 1.0f) ? 1.0f : 0.0f;
      grew += __shfl_xor_sync(0xffffffffu, grew, 1);
      if (grew != 0.0f)
#pragma unroll
        for (int i = 0; i < NT; ++i) {
          oacc[i][0] *= alpha[0];
          oacc[i][1] *= alpha[1];
          oacc[i][2] *= alpha[0];
          oacc[i][3] *= alpha[1];
        }
      // The probabilities to the B layout: pex[warp][row][key].
      if (t < 2) {
        pex[warp][r0][2 * g] = p[0];
        pex[warp][r0 + 1][2 * g] = p[1];
        pex[warp][r0][2 * g + 1] = p[2];
        pex[warp][r0 + 1][2 * g + 1] = p[3];
      }
      __syncwarp();
      // Column g's probabilities of keys 2t, 2t+1 (b0) and 2t+8, 2t+9 (b1); keys past the tile have p = 0.
      const float* pr = pex[warp][g & 3];
      const float pk[4] = {pr[2 * t], pr[2 * t + 1], pr[2 * t + 8], pr[2 * t + 9]};
      const int kk[4] = {2 * t, 2 * t + 1, 2 * t + 8, 2 * t + 9};
      const bool hi_col = g < 4;
      // B fragment of probabilities times per-key factors f (hi or lo by column).
      const auto b_frag = [&](const float (&f)[4], uint32_t (&bf)[2]) {
        uint32_t h0, l0, h1, l1;
        split_pair(pk[0] * f[0], pk[1] * f[1], h0, l0);
        split_pair(pk[2] * f[2], pk[3] * f[3], h1, l1);
        bf[0] = hi_col ? h0 : l0;
        bf[1] = hi_col ? h1 : l1;
      };

      // ---- O^T += V^T P ----
      if constexpr (kHalf) {
        // Tile i: m = g -> dim 16 i + 2g, m = g + 8 -> dim + 1 (the q8_0 map); the lane's word of dims 16 i + 2g, +1
        // of keys 2t, 2t + 1, 2t + 8, 2t + 9 (banks 8t + g + 8i (mod 32) at the padded stride: no conflicts), their
        // low halves a0 / a2, high halves a1 / a3. B = P as is. Keys past the tile read zeros: the stage holds stale or
        // unwritten bytes there, which may be f16 infinities or NaNs, and p = 0 would not cancel those.
        uint32_t bf[2];
        {
          const float one[4] = {1.0f, 1.0f, 1.0f, 1.0f};
          b_frag(one, bf);
        }
        const uint8_t* vr[4];
        bool in[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          vr[u] = vbuf + size_t(kk[u]) * vrs + 4 * g;
          in[u] = i0 + kk[u] < nk;
        }
#pragma unroll
        for (int i = 0; i < NT; ++i) {
          uint32_t e[4];
#pragma unroll
          for (int u = 0; u < 4; ++u) e[u] = in[u] ? tc::ld_word(vr[u] + 32 * i) : 0u;
          const uint32_t av[4] = {tc::lows(e[0], e[1]), tc::highs(e[0], e[1]), tc::lows(e[2], e[3]),
                                  tc::highs(e[2], e[3])};
          mma16816(oacc[i], av, bf);
        }
      } else if constexpr (VT == KvType::Q4_0 || VT == KvType::Q8_0) {  // tiles 2b, 2b + 1 in block b; P times its d
        constexpr int kBlockBytes = VT == KvType::Q4_0 ? 18 : 34;
        // The 16-bit words at byte off of the 4 keys' rows: keys 2t, 2t + 1 (w01) and 2t + 8, 2t + 9 (w23).
        const auto key_words = [&](int off, uint32_t& w01, uint32_t& w23) {
          uint32_t wv[4];
#pragma unroll
          for (int u = 0; u < 4; ++u) wv[u] = ld_u16(vbuf + size_t(kk[u]) * vrs + off);
          w01 = wv[0] | (wv[1] << 16);
          w23 = wv[2] | (wv[3] << 16);
        };
#pragma unroll
        for (int b = 0; b < NB; ++b) {
          float f[4];
#pragma unroll
          for (int u = 0; u < 4; ++u)
            f[u] = i0 + kk[u] < nk ? half_to_float(ld_u16(vbuf + size_t(kk[u]) * vrs + kBlockBytes * b)) : 0.0f;
          uint32_t bf[2];
          b_frag(f, bf);
          uint32_t w01, w23;
          if constexpr (VT == KvType::Q4_0) {
            // Bytes 2g, 2g + 1 of each key's block: dims 2g, +1 (low nibbles, tile 2b) and 16 + 2g, +1 (high, 2b + 1).
            key_words(kBlockBytes * b + 2 + 2 * g, w01, w23);
            const uint32_t a0[4] = {tc::q4_pair<0, 2, false>(w01), tc::q4_pair<1, 3, false>(w01),
                                    tc::q4_pair<0, 2, false>(w23), tc::q4_pair<1, 3, false>(w23)};
            mma16816(oacc[2 * b], a0, bf);
            const uint32_t a1[4] = {tc::q4_pair<0, 2, true>(w01), tc::q4_pair<1, 3, true>(w01),
                                    tc::q4_pair<0, 2, true>(w23), tc::q4_pair<1, 3, true>(w23)};
            mma16816(oacc[2 * b + 1], a1, bf);
          } else {
#pragma unroll
            for (int h = 0; h < 2; ++h) {  // dims 16 i + 2g, +1 (i = 2b + h) of each key
              key_words(kBlockBytes * b + 2 + 16 * h + 2 * g, w01, w23);
              w01 ^= 0x80808080u;
              w23 ^= 0x80808080u;
              // a0: dim 16i+2g of keys 2t, 2t+1; a1: dim +1 of them; a2, a3: keys 2t+8, 2t+9.
              const uint32_t af[4] = {tc::q8_pair<0, 2>(w01), tc::q8_pair<1, 3>(w01), tc::q8_pair<0, 2>(w23),
                                      tc::q8_pair<1, 3>(w23)};
              mma16816(oacc[2 * b + h], af, bf);
            }
          }
        }
      } else {  // turbo / trellis V, group by group: lane g's pieces PV g .. PV g + PV - 1 of it; P times its norm
#pragma unroll
        for (int gr = 0; gr < NG; ++gr) {
          const uint8_t* vr[4];
#pragma unroll
          for (int u = 0; u < 4; ++u) vr[u] = vbuf + size_t(kk[u]) * vrs + gr * vrec;
          float f[4];
#pragma unroll
          for (int u = 0; u < 4; ++u) f[u] = i0 + kk[u] < nk ? half_to_float(ld_u16(vr[u])) : 0.0f;
          uint32_t bf[2];
          b_frag(f, bf);
          // Piece bits of the 4 keys' pieces PV g + h (decode8s_pairs's x, js / bits).
          uint32_t px[PV][4], pj[PV][4];
#pragma unroll
          for (int h = 0; h < PV; ++h)
#pragma unroll
            for (int u = 0; u < 4; ++u) tc::piece_bits<VT, GH>(vr[u], PV * g + h, px[h][u], pj[h][u]);
#pragma unroll
          for (int i = 0; i < NTG; ++i) {  // pair i & 3 of piece PV g + i / 4: dims GH gr + (GH / 8) g + 2i, +1
            uint32_t e[4];
#pragma unroll
            for (int u = 0; u < 4; ++u) {
              uint32_t off;
              switch (i & 3) {
                case 0: off = tc::pair_off<VT, 0>(px[i >> 2][u], pj[i >> 2][u]); break;
                case 1: off = tc::pair_off<VT, 1>(px[i >> 2][u], pj[i >> 2][u]); break;
                case 2: off = tc::pair_off<VT, 2>(px[i >> 2][u], pj[i >> 2][u]); break;
                default: off = tc::pair_off<VT, 3>(px[i >> 2][u], pj[i >> 2][u]); break;
              }
              e[u] = tc::pair_word(vpair, off);
            }
            // a0: dim GH gr + (GH / 8) g + 2i of keys 2t, 2t+1; a1: dim +1; a2, a3: keys 2t+8, 2t+9.
            const uint32_t av[4] = {tc::lows(e[0], e[1]), tc::highs(e[0], e[1]), tc::lows(e[2], e[3]),
                                    tc::highs(e[2], e[3])};
            mma16816(oacc[NTG * gr + i], av, bf);
          }
        }
      }
    }  // i0 < nk
    if constexpr (kBulk) {
      // Release the stage: the last warp done with it refills it (its lane 0; padded rows: the whole warp,
      // issue_bulk_rows). The fences order this warp's reads of the stage (and, for the refilling warp, the previous
      // refill's p_next stores) around the count.
      __syncwarp();
      bool last = false;
      if (lane == 0) {
        tc::fence_block();
        last = tc::shared_fetch_inc(&released[c_st]) == NW - 1;
        if (last) {
          released[c_st] = 0;
          tc::fence_block();
          if constexpr (!kHalf) issue_bulk(c_st);
        }
      }
      if constexpr (kHalf)
        if (__any_sync(0xffffffffu, last)) issue_bulk_rows(c_st);
    }
    if (++c_st == S) {
      c_st = 0;
      parity ^= 1u;
    }
  }
  // The rows' l: the sum over the warp's g lanes.
#pragma unroll
  for (int j = 0; j < 2; ++j)
#pragma unroll
    for (int o = 4; o < 32; o *= 2) l[j] += __shfl_xor_sync(0xffffffffu, l[j], o);
  // O: hi + lo columns (lane t ^ 2 holds the other half of each of this lane's columns).
#pragma unroll
  for (int i = 0; i < NT; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) oacc[i][e] += __shfl_xor_sync(0xffffffffu, oacc[i][e], 2);
  stage_wait(0);
  if (!waited) pdl_wait_prev();
  __syncthreads();  // every thread is done with the stages: the fold reuses their memory

  if (t < 2) {
#pragma unroll
    for (int i = 0; i < NT; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = r0 + (e & 1), up = e >> 1;  // m = g + 8 up
        const int dim = kTurboV ? GH * (i / NTG) + (GH / 8) * g + 2 * (i % NTG) + up : 16 * i + 2 * g + up;
        st_acc[(warp * R + r) * HD + dim] = oacc[i][e];
      }
    if (g == 0)
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        st_ml[(warp * R + r0 + j) * 2] = m[j];
        st_ml[(warp * R + r0 + j) * 2 + 1] = l[j];
      }
  }
  __syncthreads();
  fold_slots<HD>(a, w, NW, Qs, LD, qhi, qrow, st_acc, st_ml, wgt);
}

}  // namespace POLYKV_ATTN_NS
}  // namespace polykv::cuda::attn
