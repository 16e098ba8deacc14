// The decode kernel of polykv::cuda::attention: few rows per block (a GQA group of up to
// kDecodeRows query heads of one token, or a few tokens of a small group), K and V in their stored
// types streamed through shared memory, decoded straight into registers.
//
// Same work decomposition and outputs as attention_kernel (attention_cuda_kernels.cuh): grid
// (key split, KV head x head part, sequence x query tile), one split writes the output rows, several
// write partials for merge_kernel. Inside a block:
//   - the split's keys are cut into tiles of up to TK = decode_tile_keys(head_dim) keys that never
//     cross a pool block, so a tile's K rows (and its V rows) are one contiguous byte range; the
//     block copies each range into a stage of shared memory with 16-byte cp.async copies of the
//     aligned granules covering it (the data keeps its address modulo 16, so the decoders see the
//     same alignment as in the pool), a.stages stages in a ring: while tile i is computed, tiles
//     i+1 .. i+stages-1 are in flight (bytes in flight do not depend on registers or warps);
//   - a key is read by LPK = head_dim / 16 consecutive lanes, each decoding its 16 values (two 8-value
//     pieces) and dotting them with its 16 values of each row's query, held in registers; the partial
//     dots are summed across the LPK lanes with shuffles;
//   - a warp holds 32 / LPK such key slots; slot s of the block takes keys t0 + s * kDecodeKeys + u
//     of the tile starting at t0, so each slot keeps its own online softmax state (m, l per row;
//     acc: its lanes' 16 values per row, in V's basis), updated once per tile;
//   - at the end the NS slot states are folded by log-sum-exp through shared memory (the stages'
//     memory, free by then).
// Per key and row this is 2 * head_dim FMAs on values decoded once for all rows of the block.
#pragma once
#include "backend/cuda/attention_cuda_kernels.cuh"

#if !defined(POLYKV_ATTN_EMULATION)
#include <cuda_pipeline.h>
#else
#include <cstring>
#endif

namespace polykv::cuda::attn {
inline namespace POLYKV_ATTN_NS {

template <int HD>
struct DecodeShape {
  static constexpr int LPK = HD / 16;               // lanes per key
  static constexpr int KPW = 32 / LPK;              // key slots per warp
  static constexpr int NS = KPW * (kThreads / 32);  // key slots per block
  static constexpr int TK = NS * kDecodeKeys;       // keys per tile
  static_assert(NS == decode_slots(HD) && TK == decode_tile_keys(HD));
};

// Copies bytes [src, src + len) to dst + (src mod 16) asynchronously (dst 16-byte aligned, room for
// decode_part_bytes): every thread of the block issues 16-byte cp.async copies of the aligned
// granules covering the range (their bytes outside the range lie in the same 16-byte granules of the
// pool's allocation and are never decoded). The emulation copies the range itself at once.
__device__ __forceinline__ void stage_copy(uint8_t* dst, const uint8_t* src, size_t len) {
  const size_t mis = reinterpret_cast<uintptr_t>(src) & 15u;
#if defined(POLYKV_ATTN_EMULATION)
  if (threadIdx.x == 0) std::memcpy(dst + mis, src, len);
#else
  const uint8_t* g = src - mis;
  const int n = int((mis + len + 15) >> 4);
  for (int i = threadIdx.x; i < n; i += kThreads) __pipeline_memcpy_async(dst + 16 * i, g + 16 * i, 16);
#endif
}
// e^x as 2^(x log2 e): the GPU's exp2f is one MUFU.EX2 (relative error ~1e-7, plus ~|x| 6e-8 from
// rounding the product), where expf takes a longer accurate sequence. x <= 0 here.
__device__ __forceinline__ float fast_exp(float x) { return exp2f(x * 1.44269504088896341f); }

__device__ __forceinline__ void stage_commit() {
#if !defined(POLYKV_ATTN_EMULATION)
  __pipeline_commit();
#endif
}
// Waits until at most `prior` of this thread's latest commit groups are in flight.
__device__ __forceinline__ void stage_wait(int prior) {
#if !defined(POLYKV_ATTN_EMULATION)
  __pipeline_wait_prior(size_t(prior));
#else
  (void)prior;
#endif
}

// The decode kernel's level table of a row type (decode_lut_entry(i) for i < 128): turbo<b>: level i
// (i < 2^b); turbo<b>t: the level of trellis window w and index j at i = w + 16 j, that is
// lv[subset(w) + 4 j] (j < 2^(b-1)); 0 elsewhere and for unrotated types. lv: kv_levels.
__device__ __forceinline__ float decode_lut_entry(KvType t, const float* lv, uint32_t subset_word, int i) {
  if (const int b = kv_trellis_bits(t)) {
    const int w = i & 15, j = i >> 4;
    return j < (1 << (b - 1)) ? lv[((subset_word >> (2 * w)) & 3u) + 4 * j] : 0.0f;
  }
  if (const int b = kv_turbo_bits(t)) return i < (1 << b) ? lv[i] : 0.0f;
  return 0.0f;
}

// Values 16p .. 16p+15 of a row (pieces 2p and 2p+1, which share one q8_0/q4_0 block or turbo
// group) in the stored basis, as v[k] times the returned scale (1 for float types, the block's d,
// the group's norm): the kernel applies the scale once per 16 values instead of per value. The same
// values as decode8's up to the rounding of that product. lut: the type's decode_lut_entry table.
// Turbo records: 2-byte norm, then index bytes; 16 values start at an even byte of the record.
template <KvType T>
__device__ __forceinline__ float decode16s(const uint8_t* row, int p, int hd, const float* lut, float* v) {
  if constexpr (T == KvType::F32 || T == KvType::F16 || T == KvType::BF16) {
    decode8<T>(row, 2 * p, hd, nullptr, 0, v);
    decode8<T>(row, 2 * p + 1, hd, nullptr, 0, v + 8);
    return 1.0f;
  } else if constexpr (T == KvType::Q8_0) {
    // Block p / 2 (34 bytes: fp16 d, 32 int8), its half p % 2.
    const uint8_t* blk = row + 34 * (p >> 1);
    const uint8_t* qs = blk + 2 + 16 * (p & 1);
    uint32_t w[4];
    ld_u32x2(qs, w[0], w[1]);
    ld_u32x2(qs + 8, w[2], w[3]);
#pragma unroll
    for (int m = 0; m < 4; ++m) w[m] ^= 0x80808080u;  // int8 x -> x + 128
#pragma unroll
    for (int k = 0; k < 16; ++k) v[k] = bits_to_float(magic_byte(w[k >> 2], k & 3)) - (kMagic + 128.0f);
    return half_to_float(ld_u16(blk));
  } else if constexpr (T == KvType::Q4_0) {
    // Block p / 2 (18 bytes: fp16 d, 16 bytes); values 0..15 are the low nibbles of the 16 bytes,
    // 16..31 the high ones: half p % 2.
    const uint8_t* blk = row + 18 * (p >> 1);
    const int shift = (p & 1) * 4;
    uint32_t w[4];
    ld_u32x2(blk + 2, w[0], w[1]);
    ld_u32x2(blk + 10, w[2], w[3]);
#pragma unroll
    for (int k = 0; k < 16; ++k)
      v[k] = bits_to_float(0x4B000000u | ((w[k >> 2] >> (8 * (k & 3) + shift)) & 15u)) - (kMagic + 8.0f);
    return half_to_float(ld_u16(blk));
  } else if constexpr (kv_turbo_bits(T) != 0) {
    constexpr int b = kv_turbo_bits(T);
    const int n = turbo_group_of(hd);
    const int i0 = 16 * p, g = i0 / n, i = i0 - g * n;
    const uint8_t* rec = row + g * (2 + n * b / 8);
    const uint8_t* ib = rec + 2 + b * (i >> 3);  // 16 indices of b bits: 2b bytes, LSB first
    uint64_t bits = 0;
#pragma unroll
    for (int m = 0; m < b; ++m) bits |= uint64_t(ld_u16(ib + 2 * m)) << (16 * m);
#pragma unroll
    for (int k = 0; k < 16; ++k) v[k] = lut[uint32_t(bits >> (b * k)) & ((1u << b) - 1)];
    return half_to_float(ld_u16(rec));
  } else {
    static_assert(kv_trellis_bits(T) != 0, "unknown KV type");
    constexpr int b = kv_trellis_bits(T);
    const int n = turbo_group_of(hd);
    const int i0 = 16 * p, g = i0 / n, i = i0 - g * n;
    const uint8_t* rec = row + g * (2 + n * b / 8);
    const uint8_t* tb = rec + 2;
    const uint8_t* jb = rec + 2 + n / 8 + (b - 1) * (i >> 3);  // 16 indices of b-1 bits
    // x bit k = trellis bit t_{i-3+k} (k = 0..18; t_m = 0 for m < 0): the window of coordinate i + k
    // is (x >> k) & 15 (decode8's, over two pieces).
    const uint32_t prev = i > 0 ? ld_u8(tb + (i >> 3) - 1) >> 5 : 0u;
    const uint32_t x = prev | (ld_u16(tb + (i >> 3)) << 3);
    uint64_t js = 0;
#pragma unroll
    for (int m = 0; m < b - 1; ++m) js |= uint64_t(ld_u16(jb + 2 * m)) << (16 * m);
#pragma unroll
    for (int k = 0; k < 16; ++k) {
      const uint32_t j = uint32_t(js >> ((b - 1) * k)) & ((1u << (b - 1)) - 1);
      v[k] = lut[((x >> k) & 15u) | (j << 4)];
    }
    return half_to_float(ld_u16(rec));
  }
}

template <int HD>
__global__ void __launch_bounds__(kThreads) decode_kernel(const Args a) {
  constexpr int R = kDecodeRows, KU = kDecodeKeys, LD = HD + 4;
  constexpr int LPK = DecodeShape<HD>::LPK, KPW = DecodeShape<HD>::KPW, NS = DecodeShape<HD>::NS;
  constexpr int TK = DecodeShape<HD>::TK;
  static_assert(LPK >= 1 && LPK <= 32 && 32 % LPK == 0);

  pdl_enter();
  prefetch_sequence(a);
  Work w;
  if (!block_work(a, blockIdx.y, blockIdx.z, w)) return;
  const int kb = split_begin(a, w, int(blockIdx.x));
  const int ke = split_end(a, w, int(blockIdx.x));
  if (kb >= ke) return;  // this split holds no key of the block (the merge skips it too)

  __shared__ __align__(16) float Qs[R * LD];  // queries, then the block's outputs
  __shared__ int qhi[R], qlo[R], qrow[R];
  __shared__ float lvk[32], lvv[32];
  __shared__ float lutk[128], lutv[128];  // decode_lut_entry tables of K's and V's types
  __shared__ float wgt[NS * R];  // [slot][row] weight of each slot's state in the fold
  // Per stage: the tile's first key and keys, and the offsets of its K and V rows in the stage.
  __shared__ int st_t0[kDecodeMaxStages], st_nk[kDecodeMaxStages], st_ko[kDecodeMaxStages], st_vo[kDecodeMaxStages];
  POLYKV_DYNAMIC_SHARED(smem4);
  uint8_t* stages = reinterpret_cast<uint8_t*>(smem4);  // [a.stages][K part | V part] tiles of raw rows
  const size_t kpart = a.stage_k_bytes, spart = a.stage_bytes;
  const int S = a.stages;
  float* st_acc = reinterpret_cast<float*>(smem4);  // after the tiles: [NS][R][HD] slot states: acc
  float* st_ml = st_acc + NS * R * HD;              // [NS][R][2]: m, l

  const int32_t* table = a.tables + a.table_start[w.seq];
  const int bt = a.block_tokens;
  const size_t head_row = size_t(w.g) * size_t(bt);
  // The producer: tiles issued so far and the next key to stage; every thread follows the same
  // sequence (the copies are spread over the block). One commit group per call, empty past ke, so
  // that "tile i has landed" is always "at most S - 2 groups in flight" in iteration i.
  int p_tiles = 0, p_key = kb;
  const auto issue = [&]() {
    if (p_key < ke) {
      const int bi = p_key / bt, t1 = min(min(p_key + TK, ke), (bi + 1) * bt), nk = t1 - p_key;
      const uint8_t* base = a.base + size_t(table[bi]) * a.block_stride;
      const size_t row = head_row + size_t(p_key - bi * bt);
      const uint8_t* ks = base + row * a.k_row_bytes;
      const uint8_t* vs = base + a.v_offset + row * a.v_row_bytes;
      const int st = p_tiles % S;
      uint8_t* dst = stages + size_t(st) * spart;
      stage_copy(dst, ks, size_t(nk) * a.k_row_bytes);
      stage_copy(dst + kpart, vs, size_t(nk) * a.v_row_bytes);
      if (threadIdx.x == 0) {
        st_t0[st] = p_key;
        st_nk[st] = nk;
        st_ko[st] = int(reinterpret_cast<uintptr_t>(ks) & 15u);
        st_vo[st] = int(reinterpret_cast<uintptr_t>(vs) & 15u);
      }
      p_key = t1;
    }
    ++p_tiles;
    stage_commit();
  };
  for (int i = 0; i < S - 1; ++i) issue();  // the first tiles fly during the prologue

  block_prologue<HD>(a, w, R, Qs, LD, qhi, qlo, qrow, lvk, lvv);
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int ks = lane / LPK, pl = lane - ks * LPK;  // key slot in the warp; piece pair of the lane
  const int slot = warp * KPW + ks;

  float q[R][16], acc[R][16], m[R], l[R];
  int qh[R], ql[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    qh[r] = qhi[r];
    ql[r] = qlo[r];
    m[r] = -INFINITY;
    l[r] = 0.0f;
#pragma unroll
    for (int k = 0; k < 16; ++k) {
      q[r][k] = Qs[r * LD + 16 * pl + k];
      acc[r][k] = 0.0f;
    }
  }
  const uint32_t subset_word = g_tables.subset_word;
  for (int i = tid; i < 128; i += kThreads) {  // read after the first tile's barrier
    lutk[i] = decode_lut_entry(a.k_type, lvk, subset_word, i);
    lutv[i] = decode_lut_entry(a.v_type, lvv, subset_word, i);
  }

  // Tile after tile; the loop bound comes from shared memory after a barrier (block-uniform), and
  // every lane runs every tile (the shuffles need the whole warp): slots past the tile get masked keys.
  for (int it = 0, key = kb; key < ke; ++it) {
    stage_wait(S - 2);  // this thread's copies of tile `it` have landed
    __syncthreads();    // everyone's have; everyone is done with tile it - 1, whose stage is refilled now
    issue();
    const int st = it % S;
    const int t0 = st_t0[st], nk = st_nk[st];
    key = t0 + nk;
    const uint8_t* kbuf = stages + size_t(st) * spart + st_ko[st];
    const uint8_t* vbuf = stages + size_t(st) * spart + kpart + st_vo[st];
    const int k0 = t0 + slot * KU;  // first key of the slot
    const uint8_t* krow[KU];
    const uint8_t* vrow[KU];
#pragma unroll
    for (int u = 0; u < KU; ++u) {
      const int i = slot * KU + u;  // key in the tile
      krow[u] = i < nk ? kbuf + size_t(i) * a.k_row_bytes : nullptr;
      vrow[u] = i < nk ? vbuf + size_t(i) * a.v_row_bytes : nullptr;
    }
    float s[KU][R];
    kv_type_dispatch(a.k_type, [&](auto tag) {
      constexpr KvType T = decltype(tag)::value;
#pragma unroll
      for (int u = 0; u < KU; ++u) {
        float kv[16], sc = 0.0f;
        if (krow[u]) {
          sc = decode16s<T>(krow[u], pl, HD, lutk, kv);
        } else {
#pragma unroll
          for (int k = 0; k < 16; ++k) kv[k] = 0.0f;
        }
#pragma unroll
        for (int r = 0; r < R; ++r) {
          float d = 0.0f;
#pragma unroll
          for (int k = 0; k < 16; ++k) d += q[r][k] * kv[k];
          s[u][r] = d * sc;
        }
      }
    });
#pragma unroll
    for (int u = 0; u < KU; ++u)
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int o = LPK / 2; o > 0; o /= 2) s[u][r] += __shfl_xor_sync(0xffffffffu, s[u][r], o);

    // Mask, softcap and the slot's online softmax (one rescale per tile).
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float mt = -INFINITY;
#pragma unroll
      for (int u = 0; u < KU; ++u) {
        const int pos = k0 + u;
        float x = s[u][r];
        if (a.softcap > 0.0f) x = a.softcap * tanhf(x / a.softcap);
        x = krow[u] && pos <= qh[r] && pos >= ql[r] ? x : -INFINITY;
        s[u][r] = x;
        mt = fmaxf(mt, x);
      }
      const float m_new = fmaxf(m[r], mt);
      if (m_new != m[r]) {  // m only grows; -inf -> finite rescales a zero acc by 0
        const float alpha = m[r] == -INFINITY ? 0.0f : fast_exp(m[r] - m_new);
        l[r] *= alpha;
#pragma unroll
        for (int k = 0; k < 16; ++k) acc[r][k] *= alpha;
        m[r] = m_new;
      }
#pragma unroll
      for (int u = 0; u < KU; ++u) {
        const float p = m_new == -INFINITY ? 0.0f : fast_exp(s[u][r] - m_new);
        s[u][r] = p;
        l[r] += p;
      }
    }

    kv_type_dispatch(a.v_type, [&](auto tag) {
      constexpr KvType T = decltype(tag)::value;
#pragma unroll
      for (int u = 0; u < KU; ++u) {
        if (!vrow[u]) continue;
        float v[16];
        const float sc = decode16s<T>(vrow[u], pl, HD, lutv, v);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const float ps = s[u][r] * sc;
#pragma unroll
          for (int k = 0; k < 16; ++k) acc[r][k] += ps * v[k];
        }
      }
    });
  }
  stage_wait(0);     // no copy in flight (the last groups are empty) ...
  __syncthreads();   // ... and every thread is done with the stages: the fold reuses their memory

  // Fold the NS slot states: weights exp(m_s - M) per (slot, row), then acc and l.
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int k = 0; k < 16; ++k) st_acc[(slot * R + r) * HD + 16 * pl + k] = acc[r][k];
    if (pl == 0) {
      st_ml[(slot * R + r) * 2] = m[r];
      st_ml[(slot * R + r) * 2 + 1] = l[r];
    }
  }
  __syncthreads();
  for (int i = tid; i < NS * R; i += kThreads) {
    const int r = i % R;
    float M = -INFINITY;
    for (int s = 0; s < NS; ++s) M = fmaxf(M, st_ml[(s * R + r) * 2]);
    const float ms = st_ml[i * 2];
    wgt[i] = ms == -INFINITY ? 0.0f : expf(ms - M);
  }
  __syncthreads();
  const bool partial = a.partial;
  const size_t blk = partial_index();
  for (int i = tid; i < R * HD; i += kThreads) {
    const int r = i / HD, d = i - r * HD;
    float o = 0.0f, L = 0.0f;
    for (int s = 0; s < NS; ++s) {
      const float ws = wgt[s * R + r];
      o += ws * st_acc[(s * R + r) * HD + d];
      L += ws * st_ml[(s * R + r) * 2 + 1];
    }
    if (!partial) {
      Qs[r * LD + d] = qhi[r] >= 0 ? decode_output(a, w, r, o, L, st_ml, NS) : 0.0f;
    } else if (qhi[r] >= 0) {
      a.part_o[(blk * R + r) * HD + d] = o;
      if (d == 0) {
        float M = -INFINITY;
        for (int s = 0; s < NS; ++s) M = fmaxf(M, st_ml[(s * R + r) * 2]);
        a.part_ml[(blk * R + r) * 2] = M;
        a.part_ml[(blk * R + r) * 2 + 1] = L;
      }
    }
  }
  if (partial) return;
  __syncthreads();
  write_outputs<HD>(a, w, R, Qs, LD, qrow);
}

}  // namespace POLYKV_ATTN_NS
}  // namespace polykv::cuda::attn
