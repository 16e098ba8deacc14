// The wide tensor-core kernel of the prefix pass (Plan::rows == kPrefixRows: plan_prefix with
// PrefixKernel::Wide and more than 64 rows sharing a KV head's prefix, e.g. 64 agents x GQA 4 = 256
// rows over one 32k context). The same computation as attention_mma_kernel (attention_cuda_mma.cuh:
// K/V decoded from their stored types into f16 hi/lo tiles in shared memory, S = Q K^T and O += P V
// on mma.sync.m16n8k16 with three products per fragment pair, online softmax in registers), with
// 128 rows per block instead of 64: each warp owns two 16-row tiles and feeds each K / V^T fragment
// it loads from shared memory to both. What a tile costs besides the products (decoding 32 keys of
// K and V, the f16 split, the barriers, the B-fragment loads) is thus paid once per 128 rows.
//
// Prefix pass only: every block writes its partial (m, l, unnormalized O) for merge_kernel (the
// prefix pass always has a.partial = 1: make_args sets it whenever there are shared prefixes). The
// mask stays the general one (key within the tile, and the row's window: a prefix key is never past
// a sharing row's position, so without a window every key of the prefix is visible).
//
// Shared memory: Q hi/lo [128][hd + 8] f16 each, the K / V^T tile region (which first holds half of
// the f32 queries, [64][hd + 4]: the prologue scales, rotates and splits the rows in two halves so the
// region need not hold all 128), the tile's row addresses: 105.5 KB at head size 128 (two blocks per
// multiprocessor), 55.5 KB at 64.
#pragma once
#include "backend/cuda/attention_cuda_mma.cuh"

namespace polykv::cuda::attn {
inline namespace POLYKV_ATTN_NS {

constexpr int kPrefixHalf = kPrefixRows / 2;  // query rows staged in f32 at a time by the prologue
// Bytes of the region holding the K and V^T tiles (hi and lo), first the f32 queries of a prologue half.
POLYKV_HD constexpr size_t prefix_tile_bytes(int hd) {
  const size_t kv = 2 * size_t(kTileKeys) * mma_ldq(hd) * 2 + 2 * size_t(hd) * kMmaLdv * 2;
  const size_t qs = size_t(kPrefixHalf) * (size_t(hd) + 4) * 4;
  return kv > qs ? kv : qs;
}
// Shared memory of attention_prefix_mma_kernel<hd>: Q hi/lo, the tile region, row addresses.
POLYKV_HD constexpr size_t prefix_mma_smem_bytes(int hd) {
  return 2 * size_t(kPrefixRows) * mma_ldq(hd) * 2 + prefix_tile_bytes(hd) + 2 * kTileKeys * sizeof(uint64_t);
}

template <int HD>
__global__ void __launch_bounds__(kThreads, kPrefixBlocksPerSm) attention_prefix_mma_kernel(const Args a) {
  constexpr int T = kTileKeys, R = kPrefixRows, RH = kPrefixHalf, LD = HD + 4, LQ = mma_ldq(HD), LV = kMmaLdv;
  constexpr int NT = HD / 8;  // 8-wide output tiles of a row
  constexpr int RT = 2;       // 16-row tiles per warp
  static_assert(T == 32 && kThreads == 128 && R == kThreads && R == 4 * RT * 16 && (HD == 64 || HD == 128));

  Work w;
  if (!block_work(a, blockIdx.y, blockIdx.z, w)) return;
  const int kb = max(w.kv_lo, int(blockIdx.x) * a.chunk);
  const int ke = int(min(int64_t(w.kv_hi), (int64_t(blockIdx.x) + 1) * a.chunk));
  if (kb >= ke) return;

  __shared__ int qhi[R], qlo[R], qrow[R];
  __shared__ float lvk[32], lvv[32];
  POLYKV_DYNAMIC_SHARED(smem4);
  uint16_t* Qh = reinterpret_cast<uint16_t*>(smem4);  // [R][LQ] queries (scaled, K's basis): f16 hi
  uint16_t* Ql = Qh + R * LQ;                          // [R][LQ] lo
  uint8_t* region = reinterpret_cast<uint8_t*>(Ql + R * LQ);
  uint16_t* Kh = reinterpret_cast<uint16_t*>(region);  // [T][LQ] K tile hi
  uint16_t* Kl = Kh + T * LQ;                          // [T][LQ] lo
  uint16_t* Vh = Kl + T * LQ;                          // [HD][LV] V tile transposed, hi
  uint16_t* Vl = Vh + HD * LV;                         // [HD][LV] lo
  float* Qs = reinterpret_cast<float*>(region);        // [RH][LD] f32 queries of a prologue half
  uint64_t* kp = reinterpret_cast<uint64_t*>(region + prefix_tile_bytes(HD));  // [T] K row addresses
  uint64_t* vp = kp + T;                                                       // [T] V row addresses

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, t4 = lane % 4;

  // Prologue: levels; each row's keys (qhi: last visible, -1 for no row; qlo: first) and its row in
  // q / out; then per half of the rows: the scaled queries in f32, rotated into K's basis for turbo
  // K, split into Qh / Ql.
  if (tid < 32) {
    const float* k = kv_levels(g_tables, a.k_type, HD);
    const float* v = kv_levels(g_tables, a.v_type, HD);
    lvk[tid] = tid < kv_n_levels(a.k_type) ? k[tid] : 0.0f;
    lvv[tid] = tid < kv_n_levels(a.v_type) ? v[tid] : 0.0f;
  }
  {
    const int t = tid / a.gj, jj = tid - t * a.gj;  // R == kThreads: one row per thread
    int pos = -1, row = -1;
    if (t < w.nt && jj < w.nj) block_token(a, w, t, pos, row);
    qhi[tid] = pos;
    qlo[tid] = pos < 0 ? 0x7fffffff : a.window > 0 ? max(0, pos - a.window + 1) : 0;
    qrow[tid] = row;
  }
  __syncthreads();
  const int h0 = w.g * a.group + w.j0;
  for (int half = 0; half < 2; ++half) {
    for (int i = tid; i < RH * (HD / 4); i += kThreads) {
      const int r = i / (HD / 4), d4 = i - r * (HD / 4), rr = half * RH + r;
      float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (qrow[rr] >= 0) {
        v = reinterpret_cast<const float4*>(a.q + (size_t(qrow[rr]) * a.n_head + h0 + rr % a.gj) * HD)[d4];
        v.x *= a.scale, v.y *= a.scale, v.z *= a.scale, v.w *= a.scale;
      }
      reinterpret_cast<float4*>(Qs + r * LD)[d4] = v;
    }
    __syncthreads();
    if (kv_rotated(a.k_type)) fwht_rows<HD>(Qs, LD, RH, true);  // ends with a barrier
    for (int i = tid; i < RH * HD; i += kThreads) {
      const int r = i / HD, d = i - r * HD, rr = half * RH + r;
      uint32_t hi, lo;
      split_half(Qs[r * LD + d], hi, lo);
      Qh[rr * LQ + d] = uint16_t(hi);
      Ql[rr * LQ + d] = uint16_t(lo);
    }
    __syncthreads();  // Qs is read before the next half (or the first tile) overwrites it
  }

  // This thread's rows: tile rt of the warp, C fragment rows g and g + 8.
  int rw[RT][2];
#pragma unroll
  for (int rt = 0; rt < RT; ++rt) rw[rt][0] = warp * (16 * RT) + 16 * rt + g, rw[rt][1] = rw[rt][0] + 8;
  float o[RT][NT][4];
#pragma unroll
  for (int rt = 0; rt < RT; ++rt)
#pragma unroll
    for (int n = 0; n < NT; ++n) o[rt][n][0] = o[rt][n][1] = o[rt][n][2] = o[rt][n][3] = 0.0f;
  float m[RT][2], l[RT][2];  // l: this thread's keys only
#pragma unroll
  for (int rt = 0; rt < RT; ++rt) m[rt][0] = m[rt][1] = -INFINITY, l[rt][0] = l[rt][1] = 0.0f;
  const uint32_t subset_word = g_tables.subset_word;
  const int32_t* table = a.tables + a.table_start[w.seq];
  const int bt = a.block_tokens;

  for (int t0 = kb; t0 < ke; t0 += T) {
    const int nk = min(T, ke - t0);
    if (tid < nk) {
      const int pos = t0 + tid, blk = table[pos / bt];
      const size_t row = size_t(w.g) * size_t(bt) + size_t(pos % bt);
      const uint8_t* base = a.base + size_t(blk) * a.block_stride;
      kp[tid] = reinterpret_cast<uint64_t>(base + row * a.k_row_bytes);
      vp[tid] = reinterpret_cast<uint64_t>(base + a.v_offset + row * a.v_row_bytes);
    }
    __syncthreads();  // row addresses ready; everyone is done with the previous tile
    kv_type_dispatch(a.k_type, [&](auto tag) {
      constexpr KvType KT = decltype(tag)::value;
      for (int i = tid; i < T * (HD / 8); i += kThreads) {
        const int key = i / (HD / 8), c = i - key * (HD / 8);
        float v[8];
        if (key < nk) {
          decode8<KT>(reinterpret_cast<const uint8_t*>(kp[key]), c, HD, lvk, subset_word, v);
        } else {
#pragma unroll
          for (int k = 0; k < 8; ++k) v[k] = 0.0f;
        }
        uint32_t* dh = reinterpret_cast<uint32_t*>(Kh + key * LQ + 8 * c);
        uint32_t* dl = reinterpret_cast<uint32_t*>(Kl + key * LQ + 8 * c);
#pragma unroll
        for (int k = 0; k < 4; ++k) split_pair(v[2 * k], v[2 * k + 1], dh[k], dl[k]);
      }
    });
    kv_type_dispatch(a.v_type, [&](auto tag) {
      constexpr KvType VT = decltype(tag)::value;
      for (int i = tid; i < T * (HD / 8); i += kThreads) {
        const int c = i / T, key = i - c * T;
        float v[8];
        if (key < nk) {
          decode8<VT>(reinterpret_cast<const uint8_t*>(vp[key]), c, HD, lvv, subset_word, v);
        } else {
#pragma unroll
          for (int k = 0; k < 8; ++k) v[k] = 0.0f;
        }
#pragma unroll
        for (int k = 0; k < 8; ++k) {
          uint32_t hi, lo;
          split_half(v[k], hi, lo);
          Vh[(8 * c + k) * LV + key] = uint16_t(hi);
          Vl[(8 * c + k) * LV + key] = uint16_t(lo);
        }
      }
    });
    __syncthreads();

    // S = Q K^T for both row tiles, keys 8j + 2 t4 (+1): each K fragment loaded once for both.
    float s[RT][4][4];
#pragma unroll
    for (int rt = 0; rt < RT; ++rt)
#pragma unroll
      for (int j = 0; j < 4; ++j) s[rt][j][0] = s[rt][j][1] = s[rt][j][2] = s[rt][j][3] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < HD / 16; ++ks) {
      const int c0 = 16 * ks + 2 * t4;
      uint32_t ah[RT][4], al[RT][4];
#pragma unroll
      for (int rt = 0; rt < RT; ++rt) {
        const int r0 = rw[rt][0], r1 = rw[rt][1];
        ah[rt][0] = *reinterpret_cast<const uint32_t*>(Qh + r0 * LQ + c0);
        ah[rt][1] = *reinterpret_cast<const uint32_t*>(Qh + r1 * LQ + c0);
        ah[rt][2] = *reinterpret_cast<const uint32_t*>(Qh + r0 * LQ + c0 + 8);
        ah[rt][3] = *reinterpret_cast<const uint32_t*>(Qh + r1 * LQ + c0 + 8);
        al[rt][0] = *reinterpret_cast<const uint32_t*>(Ql + r0 * LQ + c0);
        al[rt][1] = *reinterpret_cast<const uint32_t*>(Ql + r1 * LQ + c0);
        al[rt][2] = *reinterpret_cast<const uint32_t*>(Ql + r0 * LQ + c0 + 8);
        al[rt][3] = *reinterpret_cast<const uint32_t*>(Ql + r1 * LQ + c0 + 8);
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint16_t* kh = Kh + (8 * j + g) * LQ + c0;
        const uint16_t* kl = Kl + (8 * j + g) * LQ + c0;
        const uint32_t bh[2] = {*reinterpret_cast<const uint32_t*>(kh), *reinterpret_cast<const uint32_t*>(kh + 8)};
        const uint32_t bl[2] = {*reinterpret_cast<const uint32_t*>(kl), *reinterpret_cast<const uint32_t*>(kl + 8)};
#pragma unroll
        for (int rt = 0; rt < RT; ++rt) mma3(s[rt][j], ah[rt], al[rt], bh, bl);
      }
    }

    // Mask, softcap, online softmax of each row tile: rows rw[rt][0] (s[rt][j][0..1]) and rw[rt][1]
    // (s[rt][j][2..3]).
#pragma unroll
    for (int rt = 0; rt < RT; ++rt) {
      const int qh0 = qhi[rw[rt][0]], ql0 = qlo[rw[rt][0]], qh1 = qhi[rw[rt][1]], ql1 = qlo[rw[rt][1]];
      float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = 8 * j + 2 * t4 + (e & 1), pos = t0 + key;
          float x = s[rt][j][e];
          if (a.softcap > 0.0f) x = a.softcap * tanhf(x / a.softcap);
          const bool vis = key < nk && (e < 2 ? pos <= qh0 && pos >= ql0 : pos <= qh1 && pos >= ql1);
          x = vis ? x : -INFINITY;
          s[rt][j][e] = x;
          if (e < 2) mx0 = fmaxf(mx0, x);
          else mx1 = fmaxf(mx1, x);
        }
      mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
      mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
      mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
      mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
      const float n0 = fmaxf(m[rt][0], mx0), n1 = fmaxf(m[rt][1], mx1);
      // All keys of a row masked so far: m stays -inf, p = 0 (no exp(-inf - -inf)).
      const float al0 = n0 == -INFINITY ? 1.0f : expf(m[rt][0] - n0);
      const float al1 = n1 == -INFINITY ? 1.0f : expf(m[rt][1] - n1);
      m[rt][0] = n0;
      m[rt][1] = n1;
      float sum0 = 0.0f, sum1 = 0.0f;
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float mm = e < 2 ? n0 : n1;
          const float p = mm == -INFINITY ? 0.0f : expf(s[rt][j][e] - mm);
          s[rt][j][e] = p;
          if (e < 2) sum0 += p;
          else sum1 += p;
        }
      l[rt][0] = l[rt][0] * al0 + sum0;
      l[rt][1] = l[rt][1] * al1 + sum1;
#pragma unroll
      for (int n = 0; n < NT; ++n) {
        o[rt][n][0] *= al0, o[rt][n][1] *= al0;
        o[rt][n][2] *= al1, o[rt][n][3] *= al1;
      }
    }

    // O += P V: key steps of 16 (the S tiles 2 kk and 2 kk + 1 as the A fragment), 8-wide dim tiles;
    // each V^T fragment loaded once for both row tiles.
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
      uint32_t ph[RT][4], pl[RT][4];
#pragma unroll
      for (int rt = 0; rt < RT; ++rt) {
        split_pair(s[rt][2 * kk][0], s[rt][2 * kk][1], ph[rt][0], pl[rt][0]);
        split_pair(s[rt][2 * kk][2], s[rt][2 * kk][3], ph[rt][1], pl[rt][1]);
        split_pair(s[rt][2 * kk + 1][0], s[rt][2 * kk + 1][1], ph[rt][2], pl[rt][2]);
        split_pair(s[rt][2 * kk + 1][2], s[rt][2 * kk + 1][3], ph[rt][3], pl[rt][3]);
      }
      const int k0 = 16 * kk + 2 * t4;
#pragma unroll
      for (int n = 0; n < NT; ++n) {
        const uint16_t* vh = Vh + (8 * n + g) * LV + k0;
        const uint16_t* vl = Vl + (8 * n + g) * LV + k0;
        const uint32_t bh[2] = {*reinterpret_cast<const uint32_t*>(vh), *reinterpret_cast<const uint32_t*>(vh + 8)};
        const uint32_t bl[2] = {*reinterpret_cast<const uint32_t*>(vl), *reinterpret_cast<const uint32_t*>(vl + 8)};
#pragma unroll
        for (int rt = 0; rt < RT; ++rt) mma3(o[rt][n], ph[rt], pl[rt], bh, bl);
      }
    }
  }

  // The partial of every row that exists: O (unnormalized), m and l (summed over the quad's threads).
  const size_t blk = partial_index();
  float* po = a.part_o + blk * R * HD;
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
      if (e0) po[r0 * HD + d] = o[rt][n][0], po[r0 * HD + d + 1] = o[rt][n][1];
      if (e1) po[r1 * HD + d] = o[rt][n][2], po[r1 * HD + d + 1] = o[rt][n][3];
    }
    if (t4 == 0) {
      if (e0) a.part_ml[(blk * R + r0) * 2] = m[rt][0], a.part_ml[(blk * R + r0) * 2 + 1] = l0;
      if (e1) a.part_ml[(blk * R + r1) * 2] = m[rt][1], a.part_ml[(blk * R + r1) * 2 + 1] = l1;
    }
  }
}

}  // namespace POLYKV_ATTN_NS
}  // namespace polykv::cuda::attn
