// The 256-row tensor-core kernel of the prefix pass (Plan::rows == kPrefix256Rows: plan_prefix with
// PrefixKernel::Wide256, the default, and more than 128 rows sharing a KV head's prefix, e.g. 64
// agents x GQA 4 = 256 rows over one 32k context). The same computation as attention_prefix_mma_kernel
// (attention_cuda_prefix_mma.cuh), restructured for throughput (docs/CUDA_ATTENTION.md, "the prefix
// pass, restructured"):
// - 256 threads (8 warps x 2 row tiles of 16) own ALL rows of a KV head group: each K/V tile is
//   decoded from its stored type to f16 hi/lo ONCE per 256 rows (the 128-row kernel: twice, the
//   64-row kernel: 4 times), cooperatively (8 values per thread and item, 16-byte stores).
// - Two tile stages: the block decodes tile i + 1 into one stage while its warps multiply tile i from
//   the other; one barrier per tile instead of two. The rows of tile i + 2 are looked up and
//   prefetched into L1 during tile i, so the decode's global loads rarely wait on L2 / HBM.
// - V is stored row-major like K ([key][dim]); the P V B-fragments come from ldmatrix.trans, the
//   Q / K fragments from ldmatrix (one instruction per four 8x8 matrices instead of four 32-bit
//   loads; row stride hd + 8 halves: conflict-free).
// - Scaled products (the default; prefix256_scaled): f16, q8_0, q4_0, turbo and trellis values are f16
//   values times a scale (the block's d per 32 values, the group norm per row, or 1; turbo levels are
//   f16-exact), so the tiles hold those f16 values with no lo tile, K's scales multiply the 32-dim
//   partial scores (or, per row, the whole score) in f32 and V's scales the probabilities before their
//   hi / lo split: 2 MMAs per fragment pair for both products, the query's and the probabilities' hi and
//   lo (~2^-22 of f32), instead of 3. f32 / bf16 K or V (and POLYKV_CUDA_PREFIX256=split) keep hi / lo
//   tiles, where f16 K or V are exact: their lo tile is zero, so their products drop the hi x lo MMA.
// - The softmax runs in base 2 (queries scaled by scale x log2 e, ex2.approx); tiles that every row
//   of a warp sees whole (no window edge, no partial tile, no softcap) skip the mask.
// - The key range is split over the multiprocessors (one block each: ~210 KB of shared memory at
//   head size 128); merge_kernel folds the splits with the per-sequence pass as before (m is written
//   back in natural-log units).
//
// Shared memory (head size 128): Q hi/lo [256][136] f16 each (139 KB), 2 stages x (K hi, K lo, V hi,
// V lo) [32][136] f16 (68 KB; the prologue first stages 64 f32 query rows at a time there): 205 KB.
#pragma once
#include "backend/cuda/attention_cuda_mma.cuh"
#include "backend/cuda/kv_decode_scaled.cuh"

namespace polykv::cuda::attn {
inline namespace POLYKV_ATTN_NS {

// Loads four 8x8 f16 matrices: lane l gives the address of row l % 8 of matrix l / 8 (16-byte
// aligned); register i of lane l holds matrix i's row l / 4, elements 2 (l % 4) and 2 (l % 4) + 1
// (trans: the matrix transposed, i.e. column l / 4, rows 2 (l % 4) and 2 (l % 4) + 1).
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const uint16_t* p) {
#if defined(POLYKV_ATTN_EMULATION)
  POLYKV_EMU_LDSM(r, p, false);
#else
  mma::ldmatrix_x4(r, p);
#endif
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], const uint16_t* p) {
#if defined(POLYKV_ATTN_EMULATION)
  POLYKV_EMU_LDSM(r, p, true);
#else
  mma::ldmatrix_x4_trans(r, p);
#endif
}
// 2^x (ex2.approx: ~2 ulp; 2^-inf = 0).
__device__ __forceinline__ float fast_exp2(float x) {
#if defined(POLYKV_ATTN_EMULATION) || !defined(__CUDA_ARCH__)
  return std::exp2(x);
#else
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#endif
}
// Hint: brings the line of p into L1 (no effect on results; a no-op in the emulation).
__device__ __forceinline__ void prefetch_l1(const void* p) {
#if !defined(POLYKV_ATTN_EMULATION) && defined(__CUDA_ARCH__)
  asm volatile("prefetch.global.L1 [%0];" ::"l"(p));
#else
  (void)p;
#endif
}

constexpr int kPrefix256Part = 64;  // query rows staged in f32 at a time by the prologue
// f16 elements of one stage: K hi, K lo, V hi, V lo, each [kTileKeys][mma_ldq(hd)].
POLYKV_HD constexpr size_t prefix256_stage_halves(int hd) { return 4 * size_t(kTileKeys) * mma_ldq(hd); }
// Bytes of the two stages (which first hold kPrefix256Part f32 query rows of the prologue).
POLYKV_HD constexpr size_t prefix256_stages_bytes(int hd) {
  const size_t st = 2 * prefix256_stage_halves(hd) * 2;
  const size_t qs = size_t(kPrefix256Part) * (size_t(hd) + 4) * 4;
  return st > qs ? st : qs;
}
// Dynamic shared memory of attention_prefix256_kernel<hd>: Q hi/lo, the stages.
POLYKV_HD constexpr size_t prefix256_smem_bytes(int hd) {
  return 2 * size_t(kPrefix256Rows) * mma_ldq(hd) * 2 + prefix256_stages_bytes(hd);
}

// The rows of a tile: an array of row addresses (the prefix kernels), or rows at a fixed stride from
// a base (a tile staged contiguously in shared memory: the tensor-core decode kernel).
__device__ __forceinline__ const uint8_t* tile_row(const uint64_t* rows, int key) {
  return reinterpret_cast<const uint8_t*>(rows[key]);
}
struct StridedRows {
  const uint8_t* base;
  size_t stride;
};
__device__ __forceinline__ const uint8_t* tile_row(const StridedRows& rows, int key) {
  return rows.base + size_t(key) * rows.stride;
}

// Decodes keys [0, nk) of a tile of TK keys (rows: tile_row) of type KT into hi / lo [TK][LQ] f16
// (zeros for keys nk .. TK - 1); with `exact` (f16: every value is an f16) only hi. NTH threads.
template <KvType KT, int HD, int NTH, int TK = kTileKeys, class Rows>
__device__ __forceinline__ void prefix256_decode(const Rows& rows, int nk, const float* lv, uint32_t subset_word,
                                                 uint16_t* hi, uint16_t* lo) {
  constexpr int P = HD / 8, LQ = mma_ldq(HD);
  constexpr bool exact = KT == KvType::F16;
  for (int i = threadIdx.x; i < TK * P; i += NTH) {
    const int key = i / P, c = i - key * P;
    if constexpr (exact) {  // f16 rows: the stored halves are the hi tile (f16 -> f32 -> f16 is exact)
      uint32_t h[4] = {0, 0, 0, 0};
      if (key < nk) {
        const uint8_t* p = tile_row(rows, key) + 16 * c;
#pragma unroll
        for (int k = 0; k < 4; ++k) h[k] = ld_u32(p + 4 * k);
      }
      *reinterpret_cast<uint4*>(hi + key * LQ + 8 * c) = make_uint4(h[0], h[1], h[2], h[3]);
      continue;
    }
    float v[8];
    if (key < nk) {
      decode8<KT>(tile_row(rows, key), c, HD, lv, subset_word, v);
    } else {
#pragma unroll
      for (int k = 0; k < 8; ++k) v[k] = 0.0f;
    }
    uint32_t h[4], l[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) split_pair(v[2 * k], v[2 * k + 1], h[k], l[k]);
    *reinterpret_cast<uint4*>(hi + key * LQ + 8 * c) = make_uint4(h[0], h[1], h[2], h[3]);
    if (!exact) *reinterpret_cast<uint4*>(lo + key * LQ + 8 * c) = make_uint4(l[0], l[1], l[2], l[3]);
  }
}

// q8_0 rows as their int8 values (exact in f16) into hi [TK][LQ] and each 32-value block's scale d into
// scales [TK][HD / 32] floats (zeros for keys nk .. TK - 1): value = d x hi exactly, so a product with
// this tile needs no lo tile; the caller applies d to each block's partial sums.
template <int HD, int NTH, int TK, class Rows>
__device__ __forceinline__ void decode_q8_exact(const Rows& rows, int nk, uint16_t* hi, float* scales) {
  constexpr int P = HD / 8, LQ = mma_ldq(HD), NB = HD / 32;
  for (int i = threadIdx.x; i < TK * P; i += NTH) {
    const int key = i / P, c = i - key * P;
    uint32_t h[4] = {0, 0, 0, 0};
    float d = 0.0f;
    if (key < nk) {
      const uint8_t* blk = tile_row(rows, key) + 34 * (c >> 2);
      uint32_t w[2];
      ld_u32x2(blk + 2 + 8 * (c & 3), w[0], w[1]);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const uint32_t x = w[k >> 1] >> (16 * (k & 1));
        h[k] = half2_bits(float(int8_t(uint8_t(x & 0xffu))), float(int8_t(uint8_t((x >> 8) & 0xffu))));
      }
      if ((c & 3) == 0) d = half_to_float(ld_u16(blk));
    }
    *reinterpret_cast<uint4*>(hi + key * LQ + 8 * c) = make_uint4(h[0], h[1], h[2], h[3]);
    if ((c & 3) == 0) scales[key * NB + (c >> 2)] = d;
  }
}

// Decodes keys [0, nk) of a tile of TK keys (rows: tile_row) of a scaled-exact type KT
// (prefix256_scaled_type) into hi [TK][LQ] f16 values v and scales [HD / 32][TK] floats, value = v x scale
// exactly (decode8s: the q8_0 / q4_0 block's d, the turbo / trellis group's norm, repeated for every 32
// values of the group, or 1); zeros for keys nk .. TK - 1. lut: the type's scaled_lut_entry table. NTH threads.
template <KvType KT, int HD, int NTH, int TK, class Rows>
__device__ __forceinline__ void prefix256_decode_scaled(const Rows& rows, int nk, const float* lut, uint16_t* hi,
                                                        float* scales) {
  constexpr int P = HD / 8, LQ = mma_ldq(HD);
  for (int i = threadIdx.x; i < TK * P; i += NTH) {
    const int key = i / P, c = i - key * P;
    float v[8], d = 0.0f;
    if (key < nk) {
      d = decode8s<KT>(tile_row(rows, key), c, HD, lut, v);
    } else {
#pragma unroll
      for (int k = 0; k < 8; ++k) v[k] = 0.0f;
    }
    uint32_t h[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) h[k] = half2_bits(v[2 * k], v[2 * k + 1]);  // exact: every v is an f16 value
    *reinterpret_cast<uint4*>(hi + key * LQ + 8 * c) = make_uint4(h[0], h[1], h[2], h[3]);
    if ((c & 3) == 0) scales[(c >> 2) * TK + key] = d;
  }
}

// SC (prefix256_scaled): K and V tiles hold f16 values whose scales apply in f32 (the K scale to each
// 32-dim partial score, or once per key for row-scaled types; the V scale to the probabilities before
// their hi / lo split), so each product is two MMAs (hi and lo of the query or the probabilities); the
// scales [HD / 32][kTileKeys] sit where the lo tiles are otherwise. !SC: hi / lo tiles, three MMAs.
template <int HD, bool SC>
__global__ void __launch_bounds__(kPrefix256Threads, 1) attention_prefix256_kernel(const Args a) {
  constexpr int T = kTileKeys, R = kPrefix256Rows, NTH = kPrefix256Threads, RP = kPrefix256Part, LD = HD + 4;
  constexpr int LQ = mma_ldq(HD);
  constexpr int NT = HD / 8;  // 8-wide output tiles of a row
  constexpr int RT = 2;       // 16-row tiles per warp
  constexpr int SS = int(prefix256_stage_halves(HD));
  static_assert(T == 32 && R == NTH && R == (NTH / 32) * RT * 16 && (HD == 64 || HD == 128) && R % RP == 0);

  Work w;
  if (!block_work(a, blockIdx.y, blockIdx.z, w)) return;
  const int kb = max(w.kv_lo, int(blockIdx.x) * a.chunk);
  const int ke = int(min(int64_t(w.kv_hi), (int64_t(blockIdx.x) + 1) * a.chunk));
  if (kb >= ke) return;

  __shared__ int qhi[R], qlo[R], qrow[R];
  constexpr int NB = HD / 32;  // 32-value scale blocks of a row (SC)
  static_assert(2 * NB * T * 4 <= T * LQ * 2, "the scales fit in a lo tile");
  __shared__ float lvk[SC ? 128 : 32], lvv[SC ? 128 : 32];  // SC: scaled_lut_entry tables; else kv_levels
  __shared__ uint64_t kp[2][T], vp[2][T];  // row addresses of the tiles in flight (tile i: buffer i % 2)
  POLYKV_DYNAMIC_SHARED(smem4);
  uint16_t* Qh = reinterpret_cast<uint16_t*>(smem4);  // [R][LQ] queries (scaled by scale x log2 e, K's basis): hi
  uint16_t* Ql = Qh + R * LQ;                          // [R][LQ] lo
  uint16_t* St = Ql + R * LQ;                          // 2 stages of [4][T][LQ]: K hi, K lo, V hi, V lo
  float* Qs = reinterpret_cast<float*>(St);            // [RP][LD] f32 queries of a prologue part

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, t4 = lane % 4;

  // Prologue: levels (SC: the types' scaled_lut_entry tables); each row's keys (qhi: last visible, -1 for no row; qlo: first) and its row in
  // q / out. Row r is thread r's, so warp w's rows (32 w .. 32 w + 31, its two row tiles) are its
  // own lanes': the warp reduces the keys all its rows see (fast-path test) and whether it has rows.
  if constexpr (SC) {
    if (tid < 128) {
      lvk[tid] = scaled_lut_entry(a.k_type, kv_levels(g_tables, a.k_type, HD), g_tables.subset_word, tid);
      lvv[tid] = scaled_lut_entry(a.v_type, kv_levels(g_tables, a.v_type, HD), g_tables.subset_word, tid);
    }
  } else if (tid < 32) {
    const float* k = kv_levels(g_tables, a.k_type, HD);
    const float* v = kv_levels(g_tables, a.v_type, HD);
    lvk[tid] = tid < kv_n_levels(a.k_type) ? k[tid] : 0.0f;
    lvv[tid] = tid < kv_n_levels(a.v_type) ? v[tid] : 0.0f;
  }
  float whi, wlo, wany;  // min over the warp's rows of qhi, max of qlo, whether any row exists
  {
    const int t = tid / a.gj, jj = tid - t * a.gj;
    int pos = -1, row = -1;
    if (t < w.nt && jj < w.nj) block_token(a, w, t, pos, row);
    const int lo = pos < 0 ? 0x7fffffff : a.window > 0 ? max(0, pos - a.window + 1) : 0;
    qhi[tid] = pos;
    qlo[tid] = lo;
    qrow[tid] = row;
    // Positions are far below 2^24: exact as floats (the shuffles are float-only in the emulation).
    whi = pos >= 0 ? float(pos) : 3.0e38f;
    wlo = pos >= 0 ? float(lo) : -1.0f;
    wany = pos >= 0 ? 1.0f : 0.0f;
#pragma unroll
    for (int o = 16; o > 0; o /= 2) {
      whi = fminf(whi, __shfl_xor_sync(0xffffffffu, whi, o));
      wlo = fmaxf(wlo, __shfl_xor_sync(0xffffffffu, wlo, o));
      wany = fmaxf(wany, __shfl_xor_sync(0xffffffffu, wany, o));
    }
  }
  const bool warp_rows = wany > 0.0f;
  const int vis_hi = whi > 1.0e30f ? 0x7fffffff - T : int(whi), vis_lo = int(wlo);
  __syncthreads();
  const int h0 = w.g * a.group + w.j0;
  const float qscale = a.scale * 1.4426950408889634f;  // scores in log2 units
  for (int part = 0; part < R / RP; ++part) {
    for (int i = tid; i < RP * (HD / 4); i += NTH) {
      const int r = i / (HD / 4), d4 = i - r * (HD / 4), rr = part * RP + r;
      float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (qrow[rr] >= 0) {
        v = reinterpret_cast<const float4*>(a.q + (size_t(qrow[rr]) * a.n_head + h0 + rr % a.gj) * HD)[d4];
        v.x *= qscale, v.y *= qscale, v.z *= qscale, v.w *= qscale;
      }
      reinterpret_cast<float4*>(Qs + r * LD)[d4] = v;
    }
    __syncthreads();
    if (kv_rotated(a.k_type)) fwht_rows<HD, NTH>(Qs, LD, RP, true);  // ends with a barrier
    for (int i = tid; i < RP * HD; i += NTH) {
      const int r = i / HD, d = i - r * HD, rr = part * RP + r;
      uint32_t hi, lo;
      split_half(Qs[r * LD + d], hi, lo);
      Qh[rr * LQ + d] = uint16_t(hi);
      Ql[rr * LQ + d] = uint16_t(lo);
    }
    __syncthreads();  // Qs is read before the next part (or the first stage) overwrites it
  }

  const uint32_t subset_word = g_tables.subset_word;
  const int32_t* table = a.tables + a.table_start[w.seq];
  const int bt = a.block_tokens;
  const bool k_exact = a.k_type == KvType::F16, v_exact = a.v_type == KvType::F16;
  // SC: one scale per row (every block's scale the same), so the scores take it once, the probabilities once.
  const bool k_row = a.k_type != KvType::Q8_0 && a.k_type != KvType::Q4_0;
  const bool v_row = a.v_type != KvType::Q8_0 && a.v_type != KvType::Q4_0;

  // Row addresses of the tile at key tt0 into buffer buf (threads < T), and their lines into L1.
  auto tile_rows = [&](int tt0, int buf) {
    const int pos = tt0 + tid;
    if (tid < T && pos < ke) {
      const int blk = table[pos / bt];
      const size_t row = size_t(w.g) * size_t(bt) + size_t(pos % bt);
      const uint8_t* base = a.base + size_t(blk) * a.block_stride;
      const uint8_t* kr = base + row * a.k_row_bytes;
      const uint8_t* vr = base + a.v_offset + row * a.v_row_bytes;
      kp[buf][tid] = reinterpret_cast<uint64_t>(kr);
      vp[buf][tid] = reinterpret_cast<uint64_t>(vr);
      for (size_t off = 0; off < a.k_row_bytes; off += 128) prefetch_l1(kr + off);
      prefetch_l1(kr + a.k_row_bytes - 1);
      for (size_t off = 0; off < a.v_row_bytes; off += 128) prefetch_l1(vr + off);
      prefetch_l1(vr + a.v_row_bytes - 1);
    }
  };
  // Decodes the tile at key tt0 (addresses in buffer buf) into stage buf.
  auto decode_stage = [&](int tt0, int buf) {
    const int nk = min(T, ke - tt0);
    uint16_t* s = St + buf * SS;
    if constexpr (SC) {
      kv_type_dispatch(a.k_type, [&](auto tag) {
        constexpr KvType KT = decltype(tag)::value;
        if constexpr (kPrefix256ScaledType<KT>)
          prefix256_decode_scaled<KT, HD, NTH, T>(kp[buf], nk, lvk, s, reinterpret_cast<float*>(s + T * LQ));
      });
      kv_type_dispatch(a.v_type, [&](auto tag) {
        constexpr KvType KT = decltype(tag)::value;
        if constexpr (kPrefix256ScaledType<KT>)
          prefix256_decode_scaled<KT, HD, NTH, T>(vp[buf], nk, lvv, s + 2 * T * LQ,
                                                  reinterpret_cast<float*>(s + 3 * T * LQ));
      });
    } else {
      kv_type_dispatch(a.k_type, [&](auto tag) {
        prefix256_decode<decltype(tag)::value, HD, NTH>(kp[buf], nk, lvk, subset_word, s, s + T * LQ);
      });
      kv_type_dispatch(a.v_type, [&](auto tag) {
        prefix256_decode<decltype(tag)::value, HD, NTH>(vp[buf], nk, lvv, subset_word, s + 2 * T * LQ, s + 3 * T * LQ);
      });
    }
  };

  // This thread's rows: tile rt of the warp, C fragment rows g and g + 8.
  int rw[RT][2];
#pragma unroll
  for (int rt = 0; rt < RT; ++rt) rw[rt][0] = warp * (16 * RT) + 16 * rt + g, rw[rt][1] = rw[rt][0] + 8;
  float o[RT][NT][4];
#pragma unroll
  for (int rt = 0; rt < RT; ++rt)
#pragma unroll
    for (int n = 0; n < NT; ++n) o[rt][n][0] = o[rt][n][1] = o[rt][n][2] = o[rt][n][3] = 0.0f;
  float m[RT][2], l[RT][2];  // m in log2 units; l: this thread's keys only
#pragma unroll
  for (int rt = 0; rt < RT; ++rt) m[rt][0] = m[rt][1] = -INFINITY, l[rt][0] = l[rt][1] = 0.0f;
  const float cap2 = a.softcap * 1.4426950408889634f, inv_cap2 = a.softcap > 0.0f ? 1.0f / cap2 : 0.0f;

  // The pipeline: tile i's addresses are in buffer i % 2 and, once decoded, its K / V in stage i % 2.
  tile_rows(kb, 0);
  tile_rows(kb + T, 1);
  __syncthreads();
  decode_stage(kb, 0);
  __syncthreads();
  int it = 0;
  for (int t0 = kb; t0 < ke; t0 += T, ++it) {
    const int sb = it & 1;
    // Tile i + 1 into the other stage (its last reader, tile i - 1, finished before the barrier);
    // tile i + 2's addresses into this buffer (tile i's were last read decoding tile i).
    if (t0 + T < ke) decode_stage(t0 + T, sb ^ 1);
    tile_rows(t0 + 2 * T, sb);

    if (warp_rows) {
      const int nk = min(T, ke - t0);
      const uint16_t* Kh = St + sb * SS;
      const uint16_t* Kl = Kh + T * LQ;
      const uint16_t* Vh = Kl + T * LQ;
      const uint16_t* Vl = Vh + T * LQ;

      // S = Q K^T for both row tiles, key tiles j of 8 (keys 8 j + 2 t4 (+1) in this thread's C).
      float s[RT][4][4];
#pragma unroll
      for (int rt = 0; rt < RT; ++rt)
#pragma unroll
        for (int j = 0; j < 4; ++j) s[rt][j][0] = s[rt][j][1] = s[rt][j][2] = s[rt][j][3] = 0.0f;
      // One 16-dim step of S into acc: (Q hi + Q lo) x K hi, plus Q hi x K lo unless SC or K is exact.
      auto qk_step = [&](int ks, float(&acc)[RT][4][4]) {
        uint32_t ah[RT][4], al[RT][4];
#pragma unroll
        for (int rt = 0; rt < RT; ++rt) {
          // A: rows 16 rt + (lane % 16), columns 16 ks + 8 (lane / 16): a0..a3 of the fragment.
          const int qo = (warp * (16 * RT) + 16 * rt + (lane & 15)) * LQ + 16 * ks + (lane >> 4) * 8;
          ldsm_x4(ah[rt], Qh + qo);
          ldsm_x4(al[rt], Ql + qo);
        }
#pragma unroll
        for (int jp = 0; jp < 2; ++jp) {
          // B of key tiles 2 jp and 2 jp + 1: matrices (keys +0, dims +0), (+0, +8), (+8, +0), (+8, +8).
          const int ko = (16 * jp + (lane & 7) + ((lane >> 4) << 3)) * LQ + 16 * ks + ((lane >> 3) & 1) * 8;
          uint32_t bh[4], bl[4] = {0, 0, 0, 0};
          ldsm_x4(bh, Kh + ko);
          if (!SC && !k_exact) ldsm_x4(bl, Kl + ko);
#pragma unroll
          for (int jj = 0; jj < 2; ++jj) {
            const uint32_t b_h[2] = {bh[2 * jj], bh[2 * jj + 1]}, b_l[2] = {bl[2 * jj], bl[2 * jj + 1]};
#pragma unroll
            for (int rt = 0; rt < RT; ++rt) {
              mma16816(acc[rt][2 * jp + jj], al[rt], b_h);
              if (!SC && !k_exact) mma16816(acc[rt][2 * jp + jj], ah[rt], b_l);
              mma16816(acc[rt][2 * jp + jj], ah[rt], b_h);
            }
          }
        }
      };
      // SC: K's scales of this thread's keys 8 j + 2 t4 (+1) in block b, times acc, added to s.
      auto add_scaled = [&](int b, const float(&acc)[RT][4][4]) {
        const float* ksc = reinterpret_cast<const float*>(Kl) + b * T;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float2 d = *reinterpret_cast<const float2*>(ksc + 8 * j + 2 * t4);
#pragma unroll
          for (int rt = 0; rt < RT; ++rt) {
            s[rt][j][0] = fmaf(acc[rt][j][0], d.x, s[rt][j][0]);
            s[rt][j][1] = fmaf(acc[rt][j][1], d.y, s[rt][j][1]);
            s[rt][j][2] = fmaf(acc[rt][j][2], d.x, s[rt][j][2]);
            s[rt][j][3] = fmaf(acc[rt][j][3], d.y, s[rt][j][3]);
          }
        }
      };
      if (!SC || k_row) {
#pragma unroll
        for (int ks = 0; ks < HD / 16; ++ks) qk_step(ks, s);
        if (SC) {  // the row's scale, once
          const float* ksc = reinterpret_cast<const float*>(Kl);
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const float2 d = *reinterpret_cast<const float2*>(ksc + 8 * j + 2 * t4);
#pragma unroll
            for (int rt = 0; rt < RT; ++rt) {
              s[rt][j][0] *= d.x, s[rt][j][1] *= d.y;
              s[rt][j][2] *= d.x, s[rt][j][3] *= d.y;
            }
          }
        }
      } else {
#pragma unroll
        for (int b = 0; b < NB; ++b) {
          float acc[RT][4][4];
#pragma unroll
          for (int rt = 0; rt < RT; ++rt)
#pragma unroll
            for (int j = 0; j < 4; ++j) acc[rt][j][0] = acc[rt][j][1] = acc[rt][j][2] = acc[rt][j][3] = 0.0f;
          qk_step(2 * b, acc);
          qk_step(2 * b + 1, acc);
          add_scaled(b, acc);
        }
      }

      // Mask (unless every row of the warp sees the whole tile), softcap, online softmax in base 2.
      const bool whole = nk == T && t0 >= vis_lo && t0 + T - 1 <= vis_hi && !(a.softcap > 0.0f);
#pragma unroll
      for (int rt = 0; rt < RT; ++rt) {
        if (!whole) {
          const int qh0 = qhi[rw[rt][0]], ql0 = qlo[rw[rt][0]], qh1 = qhi[rw[rt][1]], ql1 = qlo[rw[rt][1]];
#pragma unroll
          for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int key = 8 * j + 2 * t4 + (e & 1), pos = t0 + key;
              float x = s[rt][j][e];
              if (a.softcap > 0.0f) x = cap2 * tanhf(x * inv_cap2);
              const bool vis = key < nk && (e < 2 ? pos <= qh0 && pos >= ql0 : pos <= qh1 && pos >= ql1);
              s[rt][j][e] = vis ? x : -INFINITY;
            }
        }
        float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          mx0 = fmaxf(mx0, fmaxf(s[rt][j][0], s[rt][j][1]));
          mx1 = fmaxf(mx1, fmaxf(s[rt][j][2], s[rt][j][3]));
        }
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
        const float n0 = fmaxf(m[rt][0], mx0), n1 = fmaxf(m[rt][1], mx1);
        // A row with every key masked so far keeps m = -inf: subtracting 0 instead gives p = 2^-inf
        // = 0 and a rescale 2^-inf = 0 of its (zero) l and O.
        const float b0 = n0 == -INFINITY ? 0.0f : n0, b1 = n1 == -INFINITY ? 0.0f : n1;
        const float al0 = fast_exp2(m[rt][0] - b0), al1 = fast_exp2(m[rt][1] - b1);
        m[rt][0] = n0;
        m[rt][1] = n1;
        float sum0 = 0.0f, sum1 = 0.0f;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          s[rt][j][0] = fast_exp2(s[rt][j][0] - b0);
          s[rt][j][1] = fast_exp2(s[rt][j][1] - b0);
          s[rt][j][2] = fast_exp2(s[rt][j][2] - b1);
          s[rt][j][3] = fast_exp2(s[rt][j][3] - b1);
          sum0 += s[rt][j][0] + s[rt][j][1];
          sum1 += s[rt][j][2] + s[rt][j][3];
        }
        l[rt][0] = l[rt][0] * al0 + sum0;
        l[rt][1] = l[rt][1] * al1 + sum1;
        // SC: skipped when no row of the warp has a new maximum (every al is 2^0 = 1 exactly: the same
        // bits). (In the split kernel the vote cost registers: 64 bytes of spills at head size 128, not 28.)
        if (!SC || __any_sync(0xffffffffu, al0 != 1.0f || al1 != 1.0f)) {
#pragma unroll
          for (int n = 0; n < NT; ++n) {
            o[rt][n][0] *= al0, o[rt][n][1] *= al0;
            o[rt][n][2] *= al1, o[rt][n][3] *= al1;
          }
        }
      }

      // O += P V: key steps of 16 (S tiles 2 kk, 2 kk + 1 as the A fragment), dim tiles n of 8 in
      // pairs from one ldmatrix.trans each: matrices (keys +0, dims +0), (+8, +0), (+0, +8), (+8, +8).
      // SC: the probabilities times V's scale of their key (block np / 2's, or the row's) before the split.
#pragma unroll
      for (int kk = 0; kk < 2; ++kk) {
        uint32_t ph[RT][4], pl[RT][4];
        // A fragment of key step kk: this thread's keys 16 kk + 2 t4 (+1) and 16 kk + 8 + 2 t4 (+1).
        auto split_p = [&](float2 f0, float2 f1) {
#pragma unroll
          for (int rt = 0; rt < RT; ++rt) {
            if constexpr (SC) {
              split_pair(s[rt][2 * kk][0] * f0.x, s[rt][2 * kk][1] * f0.y, ph[rt][0], pl[rt][0]);
              split_pair(s[rt][2 * kk][2] * f0.x, s[rt][2 * kk][3] * f0.y, ph[rt][1], pl[rt][1]);
              split_pair(s[rt][2 * kk + 1][0] * f1.x, s[rt][2 * kk + 1][1] * f1.y, ph[rt][2], pl[rt][2]);
              split_pair(s[rt][2 * kk + 1][2] * f1.x, s[rt][2 * kk + 1][3] * f1.y, ph[rt][3], pl[rt][3]);
            } else {
              split_pair(s[rt][2 * kk][0], s[rt][2 * kk][1], ph[rt][0], pl[rt][0]);
              split_pair(s[rt][2 * kk][2], s[rt][2 * kk][3], ph[rt][1], pl[rt][1]);
              split_pair(s[rt][2 * kk + 1][0], s[rt][2 * kk + 1][1], ph[rt][2], pl[rt][2]);
              split_pair(s[rt][2 * kk + 1][2], s[rt][2 * kk + 1][3], ph[rt][3], pl[rt][3]);
            }
          }
        };
        auto v_scales = [&](int b, float2& f0, float2& f1) {
          const float* vsc = reinterpret_cast<const float*>(Vl) + b * T + 16 * kk + 2 * t4;
          f0 = *reinterpret_cast<const float2*>(vsc);
          f1 = *reinterpret_cast<const float2*>(vsc + 8);
        };
        if constexpr (!SC) split_p(make_float2(1.0f, 1.0f), make_float2(1.0f, 1.0f));
#pragma unroll
        for (int np = 0; np < HD / 16; ++np) {
          if constexpr (SC) {
            if (np == 0 || (!v_row && np % 2 == 0)) {
              float2 f0, f1;
              v_scales(np / 2, f0, f1);
              split_p(f0, f1);
            }
          }
          const int vo = (16 * kk + (lane & 7) + ((lane >> 3) & 1) * 8) * LQ + 16 * np + (lane >> 4) * 8;
          uint32_t bh[4], bl[4] = {0, 0, 0, 0};
          ldsm_x4_trans(bh, Vh + vo);
          if (!SC && !v_exact) ldsm_x4_trans(bl, Vl + vo);
#pragma unroll
          for (int nn = 0; nn < 2; ++nn) {
            const uint32_t b_h[2] = {bh[2 * nn], bh[2 * nn + 1]}, b_l[2] = {bl[2 * nn], bl[2 * nn + 1]};
#pragma unroll
            for (int rt = 0; rt < RT; ++rt) {
              mma16816(o[rt][2 * np + nn], pl[rt], b_h);
              if (!SC && !v_exact) mma16816(o[rt][2 * np + nn], ph[rt], b_l);
              mma16816(o[rt][2 * np + nn], ph[rt], b_h);
            }
          }
        }
      }
    }
    __syncthreads();  // stage sb is free; stage sb ^ 1 and buffer sb are complete
  }

  // The partial of every row that exists: O (unnormalized, V's basis), m (natural-log units) and l
  // (summed over the quad's threads).
  if (!warp_rows) return;  // no barrier follows
  const size_t blk = partial_index();
  float* po = a.part_o + blk * R * HD;
  constexpr float kLn2 = 0.6931471805599453f;
#pragma unroll
  for (int rt = 0; rt < RT; ++rt) {
    float l0 = l[rt][0], l1 = l[rt][1];
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    const int r0 = rw[rt][0], r1 = rw[rt][1];
    const bool e0 = qhi[r0] >= 0, e1 = qhi[r1] >= 0;
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      const int d = 8 * n + 2 * t4;
      if (e0) *reinterpret_cast<float2*>(po + r0 * HD + d) = make_float2(o[rt][n][0], o[rt][n][1]);
      if (e1) *reinterpret_cast<float2*>(po + r1 * HD + d) = make_float2(o[rt][n][2], o[rt][n][3]);
    }
    if (t4 == 0) {
      if (e0) a.part_ml[(blk * R + r0) * 2] = m[rt][0] * kLn2, a.part_ml[(blk * R + r0) * 2 + 1] = l0;
      if (e1) a.part_ml[(blk * R + r1) * 2] = m[rt][1] * kLn2, a.part_ml[(blk * R + r1) * 2 + 1] = l1;
    }
  }
}

// Calls f with the 256-row kernel a launch of (k, v) takes: scaled (prefix256_scaled) or split.
template <int HD, class F>
void prefix256_pick(KvType k, KvType v, F&& f) {
  if (prefix256_scaled(k, v)) {
    f(&attention_prefix256_kernel<HD, true>);
  } else {
    f(&attention_prefix256_kernel<HD, false>);
  }
}

}  // namespace POLYKV_ATTN_NS
}  // namespace polykv::cuda::attn
