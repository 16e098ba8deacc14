// The tensor-core decode kernel of polykv::cuda::attention (Plan::kernel == Kernel::DecodeMma:
// decode and verify steps of up to kDecodeMmaMaxTokens tokens over long contexts, head sizes 64, 128
// and 256; attention_cuda_plan.h plan_decode_mma). docs/CUDA_ATTENTION.md "Tensor-core decode".
//
// Why: the lanes8 kernel (attention_cuda_decode8.cuh) does ~20 thread instructions per K or V value
// (dots and axpys on CUDA cores for each of the GQA group's rows); here each value is decoded once per
// block into f16 (hi / lo) in shared memory and both products run on mma.sync.m16n8k16, so the
// per-value cost is the decode and split alone.
//
// Work decomposition as the other kernels (attention_cuda_kernels.cuh): grid (key split, KV head x
// head part, sequence x query tile); a block's R = 16 rows r = t * gj + jj (query token t, head jj)
// are one 16-row tile of the mma (padded with empty rows). Inside a block (128 threads, 4 warps):
//   - keys in tiles of up to T = 32 that never cross a pool block: the tile's K rows and V rows are
//     two contiguous byte ranges, copied raw into a ring of a.stages stages by cp.async (stage_copy,
//     as the lanes8 kernel: S - 1 tiles in flight while one is computed);
//   - per tile every thread decodes 8-value pieces of K and V from the ring (decode8, the decoders
//     of every kernel) into f16 hi / lo tiles Kh, Kl, Vh, Vl [T][hd + 8] (prefix256_decode; f16
//     types are exact: no lo tile, 2 products instead of 3);
//   - warp w = (key group kg = w % 2: the tile's keys 16 kg .. 16 kg + 15; dim part dp = w / 2:
//     output dims dp * hd/2 .. +hd/2): S = Q K^T for its 16 keys (ldmatrix, mma), mask, online
//     softmax in base 2 (queries scaled by scale x log2 e) over its keys, O += P V for its dims. The
//     two warps of a key group compute the same S and softmax (cheap) so that O needs hd / 4 floats
//     per thread instead of hd / 2;
//   - at the end the two key groups' states (m, l, O) are folded through shared memory into the
//     block's partial (m in natural-log units, for merge_kernel) or, with one split and no shared
//     prefix, its normalized output rows (row_norm: sinks; write_outputs: turbo V rotated back).
// Exactness as the prefill kernels: x = hi + lo (half_split.cuh), three products per fragment pair
// (the kBound 1e-4 of the CPU reference holds).
#pragma once
#include "backend/cuda/attention_cuda_decode.cuh"
#include "backend/cuda/attention_cuda_prefix256.cuh"

namespace polykv::cuda::attn {
inline namespace POLYKV_ATTN_NS {

// TR: the transposed layout (Plan::decode_tr, head sizes 64 and 128; attention_cuda_plan.h): R = 8
// rows, tiles of T = 64 keys; warp w owns keys 16 w .. 16 w + 15 of a tile and every dim: S^T = K Q^T
// (A = the K tile by ldmatrix, B = Q^T: 32-bit loads of Q's rows), C = (key g / g + 8, rows 2 t4,
// 2 t4 + 1); online softmax per row over the warp's keys (shuffles across g); P^T through a per-warp
// scratch into B fragments (keys x rows); O^T += V^T P^T (A = V^T by ldmatrix.trans), C = (dim 16 mt +
// g / + 8, rows 2 t4, 2 t4 + 1). The four warps' states are folded at the end.
template <int HD, bool TR = false>
__global__ void __launch_bounds__(kThreads, TR ? 2 : 3) decode_mma_kernel(const Args a) {
  constexpr int R = TR ? 8 : 16, T = TR ? 64 : 32, LQ = mma_ldq(HD), LD = HD + 4;
  constexpr int DPW = TR ? HD : HD / 2;  // output dims per warp
  constexpr int NTW = HD / 16;           // its output tiles (8 wide; TR: 16 high)
  constexpr int NST = TR ? 4 : 2;        // softmax states folded at the end (key groups)
  static_assert(kThreads == 128 && (HD == 64 || HD == 128 || (HD == 256 && !TR)) && DPW % 16 == 0);
  // The decoded tiles' region first holds the f32 queries [R][LD] and at the end the fold: the key
  // groups' O [NST][R][HD] and (m, l) [NST][R][2], then the outputs [R][LD].
  static_assert(size_t(R) * LD * 4 <= 4 * size_t(T) * LQ * 2);
  static_assert((NST * size_t(R) * HD + 2 * NST * R + size_t(R) * LD) * 4 <= 4 * size_t(T) * LQ * 2);
  static_assert((NST * size_t(R) * HD + 2 * NST * R) % 4 == 0);

  pdl_enter();
  prefetch_sequence(a);
  Work w;
  if (!block_work(a, blockIdx.y, blockIdx.z, w)) return;
  // The first key read: kv_lo rounded down to a multiple of T, but not below its pool block or its
  // split (keys before kv_lo are masked for every row). So with pool blocks of a multiple of T keys the
  // tiles start at multiples of T whatever the first row's window: a row's scores meet the same tiles
  // in a decode step and in a verify step (docs/CUDA_ATTENTION.md, invariance).
  const int bt = a.block_tokens;
  const int lo = max(max(w.kv_lo / T * T, w.kv_lo / bt * bt), w.kv_lo / a.chunk * a.chunk);
  const int kb = max(lo, int(blockIdx.x) * a.chunk);
  const int ke = int(min(int64_t(w.kv_hi), (int64_t(blockIdx.x) + 1) * a.chunk));
  if (kb >= ke) return;  // this split holds no key of the block (the merge skips it too)

  __shared__ int qhi[R], qlo[R], qrow[R];
  __shared__ float lvk[32], lvv[32];
  __shared__ int st_t0[kDecodeMaxStages], st_nk[kDecodeMaxStages], st_ko[kDecodeMaxStages], st_vo[kDecodeMaxStages];
  __shared__ float Pt[TR ? 4 * 16 * 8 : 1];  // TR: [warp][16 keys][8 rows] probabilities (P^T's exchange)
  POLYKV_DYNAMIC_SHARED(smem4);
  uint16_t* Qh = reinterpret_cast<uint16_t*>(smem4);  // [R][LQ] queries (scaled by scale x log2 e, K's basis): hi
  uint16_t* Ql = Qh + R * LQ;                          // [R][LQ] lo
  uint16_t* Kh = Ql + R * LQ;                          // [T][LQ] decoded K tile: hi
  uint16_t* Kl = Kh + T * LQ;                          // [T][LQ] lo
  uint16_t* Vh = Kl + T * LQ;                          // [T][LQ] decoded V tile (row-major): hi
  uint16_t* Vl = Vh + T * LQ;                          // [T][LQ] lo
  uint8_t* ring = reinterpret_cast<uint8_t*>(Vl + T * LQ);  // [a.stages][K part | V part] raw rows
  float* Qs = reinterpret_cast<float*>(Kh);            // [R][LD] f32 queries of the prologue
  const size_t kpart = a.stage_k_bytes, spart = a.stage_bytes;
  const int S = a.stages;

  const int32_t* table = a.tables + a.table_start[w.seq];
  const size_t head_row = size_t(w.g) * size_t(bt);
  // The producer (as the lanes8 kernel's): tile p_tiles into ring stage p_tiles % S, one commit group
  // per call (empty past ke). A tile ends at ke, at T keys, or at the end of its pool block.
  int p_tiles = 0, p_key = kb;
  const auto issue = [&]() {
    if (p_key < ke) {
      const int bi = p_key / bt;
      const int t1 = min(min(p_key + T, ke), (bi + 1) * bt), nk = t1 - p_key;
      const uint8_t* base = a.base + size_t(table[bi]) * a.block_stride;
      const size_t row = head_row + size_t(p_key - bi * bt);
      const uint8_t* ks = base + row * a.k_row_bytes;
      const uint8_t* vs = base + a.v_offset + row * a.v_row_bytes;
      const int st = p_tiles % S;
      uint8_t* dst = ring + size_t(st) * spart;
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
  for (int i = 0; i < S - 1; ++i) issue();

  // Prologue: levels, rows (qhi / qlo / qrow), f32 queries (scaled, rotated into K's basis for turbo
  // K) into Qs; then hi / lo in base-2 units into Qh / Ql.
  block_prologue<HD>(a, w, R, Qs, LD, qhi, qlo, qrow, lvk, lvv);
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, t4 = lane % 4;
  constexpr float kLog2e = 1.4426950408889634f;
  for (int i = tid; i < R * HD; i += kThreads) {
    const int r = i / HD, d = i - r * HD;
    uint32_t hi, lo;
    split_half(Qs[r * LD + d] * kLog2e, hi, lo);
    Qh[r * LQ + d] = uint16_t(hi);
    Ql[r * LQ + d] = uint16_t(lo);
  }
  // (The first tile's barrier orders these reads of Qs before the decode overwrites the region.)

  // Key group (keys 16 kg .. of a tile), dim part (dims dp * DPW ..): TR 4 x 1, else 2 x 2.
  const int kg = TR ? warp : warp & 1, dp = TR ? 0 : warp >> 1;
  // This thread's two rows: g, g + 8 (TR: 2 t4, 2 t4 + 1), with their key ranges.
  const int ra = TR ? 2 * t4 : g, rb = TR ? 2 * t4 + 1 : g + 8;
  const int qh0 = qhi[ra], ql0 = qlo[ra], qh1 = qhi[rb], ql1 = qlo[rb];
  float o[NTW][4];
#pragma unroll
  for (int n = 0; n < NTW; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;  // rows ra, rb, base 2; l: this thread's keys only
  const float cap2 = a.softcap * kLog2e, inv_cap2 = a.softcap > 0.0f ? 1.0f / cap2 : 0.0f;
  const uint32_t subset_word = g_tables.subset_word;
  const bool k_exact = a.k_type == KvType::F16, v_exact = a.v_type == KvType::F16;
  // TR with q8_0 K: the K tile holds the int8 values (exact in f16) and Ksc [T][HD / 32] (in Kl's memory)
  // the block scales; S^T is summed per 32-dim block (two k-steps) and scaled: 2 products per k-step
  // and no f16 split of K.
  const bool k_q8 = TR && a.k_type == KvType::Q8_0;
  float* Ksc = reinterpret_cast<float*>(Kl);
  constexpr int NB = HD / 32;

  for (int it = 0, key = kb; key < ke; ++it) {
    stage_wait(S - 2);
    __syncthreads();  // tile it has landed; every warp is done with the previous decoded tile
    issue();          // tile it + S - 1 into the stage tile it - 1 used (decoded before the barrier)
    const int st = it % S;
    const int t0 = st_t0[st], nk = st_nk[st];
    key = t0 + nk;
    const uint8_t* stage = ring + size_t(st) * spart;
    const StridedRows krows{stage + st_ko[st], a.k_row_bytes}, vrows{stage + kpart + st_vo[st], a.v_row_bytes};
    if (k_q8) {  // TR only: int8 values (exact) into Kh, block scales into Ksc
      decode_q8_exact<HD, kThreads, T>(krows, nk, Kh, Ksc);
    } else {
      kv_type_dispatch(a.k_type, [&](auto tag) {
        prefix256_decode<decltype(tag)::value, HD, kThreads, T>(krows, nk, lvk, subset_word, Kh, Kl);
      });
    }
    kv_type_dispatch(a.v_type, [&](auto tag) {
      prefix256_decode<decltype(tag)::value, HD, kThreads, T>(vrows, nk, lvv, subset_word, Vh, Vl);
    });
    __syncthreads();

    if constexpr (TR) {
      // S^T = K Q^T: keys 16 kg + g (+ 8) x rows 2 t4 (+1) in s[0..1] (s[2..3]).
      float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      if (k_q8) {
#pragma unroll
        for (int b = 0; b < NB; ++b) {
          float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};  // block b's sums of int8 x (Q hi + lo)
#pragma unroll
          for (int kk = 0; kk < 2; ++kk) {
            const int ks = 2 * b + kk;
            const int ko = (16 * kg + (lane & 15)) * LQ + 16 * ks + (lane >> 4) * 8;
            uint32_t ah[4];
            ldsm_x4(ah, Kh + ko);
            const int qo = g * LQ + 16 * ks + 2 * t4;
            const uint32_t bh[2] = {*reinterpret_cast<const uint32_t*>(Qh + qo),
                                    *reinterpret_cast<const uint32_t*>(Qh + qo + 8)};
            const uint32_t bl[2] = {*reinterpret_cast<const uint32_t*>(Ql + qo),
                                    *reinterpret_cast<const uint32_t*>(Ql + qo + 8)};
            mma16816(c, ah, bl);
            mma16816(c, ah, bh);
          }
          const float d0 = Ksc[(16 * kg + g) * NB + b], d1 = Ksc[(16 * kg + g + 8) * NB + b];
          s[0] += d0 * c[0];
          s[1] += d0 * c[1];
          s[2] += d1 * c[2];
          s[3] += d1 * c[3];
        }
      } else {
#pragma unroll
        for (int ks = 0; ks < HD / 16; ++ks) {
          // A: keys 16 kg + lane % 16, dims 16 ks + 8 (lane / 16).
          const int ko = (16 * kg + (lane & 15)) * LQ + 16 * ks + (lane >> 4) * 8;
          uint32_t ah[4], al[4] = {0, 0, 0, 0};
          ldsm_x4(ah, Kh + ko);
          if (!k_exact) ldsm_x4(al, Kl + ko);
          // B = Q^T: b0 = dims 16 ks + 2 t4 (+1) of row g, b1 = dims + 8.
          const int qo = g * LQ + 16 * ks + 2 * t4;
          const uint32_t bh[2] = {*reinterpret_cast<const uint32_t*>(Qh + qo), *reinterpret_cast<const uint32_t*>(Qh + qo + 8)};
          const uint32_t bl[2] = {*reinterpret_cast<const uint32_t*>(Ql + qo), *reinterpret_cast<const uint32_t*>(Ql + qo + 8)};
          if (!k_exact) mma16816(s, al, bh);
          mma16816(s, ah, bl);
          mma16816(s, ah, bh);
        }
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int k = 16 * kg + g + 8 * (e >> 1), pos = t0 + k;
        float x = s[e];
        if (a.softcap > 0.0f) x = cap2 * tanhf(x * inv_cap2);
        const bool vis = k < nk && ((e & 1) == 0 ? pos <= qh0 && pos >= ql0 : pos <= qh1 && pos >= ql1);
        s[e] = vis ? x : -INFINITY;
      }
      float mx0 = fmaxf(s[0], s[2]), mx1 = fmaxf(s[1], s[3]);
#pragma unroll
      for (int x = 4; x < 32; x *= 2) {
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, x));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, x));
      }
      const float n0 = fmaxf(m0, mx0), n1 = fmaxf(m1, mx1);
      const float b0 = n0 == -INFINITY ? 0.0f : n0, b1 = n1 == -INFINITY ? 0.0f : n1;
      const float al0 = fast_exp2(m0 - b0), al1 = fast_exp2(m1 - b1);
      m0 = n0;
      m1 = n1;
      s[0] = fast_exp2(s[0] - b0);
      s[1] = fast_exp2(s[1] - b1);
      s[2] = fast_exp2(s[2] - b0);
      s[3] = fast_exp2(s[3] - b1);
      l0 = l0 * al0 + (s[0] + s[2]);
      l1 = l1 * al1 + (s[1] + s[3]);
#pragma unroll
      for (int n = 0; n < NTW; ++n) {
        o[n][0] *= al0, o[n][1] *= al1;
        o[n][2] *= al0, o[n][3] *= al1;
      }
      // P^T as the B operand (keys x rows): through the warp's scratch [16 keys][8 rows].
      float* ps = Pt + warp * 16 * 8;
      ps[g * 8 + 2 * t4] = s[0];
      ps[g * 8 + 2 * t4 + 1] = s[1];
      ps[(g + 8) * 8 + 2 * t4] = s[2];
      ps[(g + 8) * 8 + 2 * t4 + 1] = s[3];
      __syncwarp();
      uint32_t ph[2], pl[2];  // b0: keys 2 t4, 2 t4 + 1 of row g; b1: keys + 8
      split_pair(ps[(2 * t4) * 8 + g], ps[(2 * t4 + 1) * 8 + g], ph[0], pl[0]);
      split_pair(ps[(2 * t4 + 8) * 8 + g], ps[(2 * t4 + 9) * 8 + g], ph[1], pl[1]);
      __syncwarp();
      // O^T += V^T P^T: A = V^T (dims 16 mt .. x the warp's keys) by ldmatrix.trans: matrices (keys +0,
      // dims +0), (+0, +8), (+8, +0), (+8, +8) = a0 .. a3.
#pragma unroll
      for (int mt = 0; mt < NTW; ++mt) {
        const int vo = (16 * kg + ((lane >> 4) << 3) + (lane & 7)) * LQ + 16 * mt + ((lane >> 3) & 1) * 8;
        uint32_t ah[4], al[4] = {0, 0, 0, 0};
        ldsm_x4_trans(ah, Vh + vo);
        if (!v_exact) ldsm_x4_trans(al, Vl + vo);
        if (!v_exact) mma16816(o[mt], al, ph);
        mma16816(o[mt], ah, pl);
        mma16816(o[mt], ah, ph);
      }
    } else {
      // S = Q K^T, rows 0..15, keys 16 kg + 8 jj + 2 t4 (+1) in s[jj] (C fragments).
      float s[2][4];
#pragma unroll
      for (int jj = 0; jj < 2; ++jj) s[jj][0] = s[jj][1] = s[jj][2] = s[jj][3] = 0.0f;
#pragma unroll
      for (int ks = 0; ks < HD / 16; ++ks) {
        uint32_t ah[4], al[4];
        // A: rows lane % 16, columns 16 ks + 8 (lane / 16).
        const int qo = (lane & 15) * LQ + 16 * ks + (lane >> 4) * 8;
        ldsm_x4(ah, Qh + qo);
        ldsm_x4(al, Ql + qo);
        // B of key tiles 0 and 1 of the group: matrices (keys +0, dims +0), (+0, +8), (+8, +0), (+8, +8).
        const int ko = (16 * kg + (lane & 7) + ((lane >> 4) << 3)) * LQ + 16 * ks + ((lane >> 3) & 1) * 8;
        uint32_t bh[4], bl[4] = {0, 0, 0, 0};
        ldsm_x4(bh, Kh + ko);
        if (!k_exact) ldsm_x4(bl, Kl + ko);
#pragma unroll
        for (int jj = 0; jj < 2; ++jj) {
          const uint32_t b_h[2] = {bh[2 * jj], bh[2 * jj + 1]}, b_l[2] = {bl[2 * jj], bl[2 * jj + 1]};
          mma16816(s[jj], al, b_h);
          if (!k_exact) mma16816(s[jj], ah, b_l);
          mma16816(s[jj], ah, b_h);
        }
      }

      // Mask (key in the tile, the row's causal end and window), softcap, online softmax in base 2.
#pragma unroll
      for (int jj = 0; jj < 2; ++jj)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int k = 16 * kg + 8 * jj + 2 * t4 + (e & 1), pos = t0 + k;
          float x = s[jj][e];
          if (a.softcap > 0.0f) x = cap2 * tanhf(x * inv_cap2);
          const bool vis = k < nk && (e < 2 ? pos <= qh0 && pos >= ql0 : pos <= qh1 && pos >= ql1);
          s[jj][e] = vis ? x : -INFINITY;
        }
      float mx0 = fmaxf(fmaxf(s[0][0], s[0][1]), fmaxf(s[1][0], s[1][1]));
      float mx1 = fmaxf(fmaxf(s[0][2], s[0][3]), fmaxf(s[1][2], s[1][3]));
      mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
      mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
      mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
      mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
      const float n0 = fmaxf(m0, mx0), n1 = fmaxf(m1, mx1);
      // A row with every key masked so far keeps m = -inf: subtracting 0 instead gives p = 2^-inf = 0
      // and a rescale 2^-inf = 0 of its (zero) l and O.
      const float b0 = n0 == -INFINITY ? 0.0f : n0, b1 = n1 == -INFINITY ? 0.0f : n1;
      const float al0 = fast_exp2(m0 - b0), al1 = fast_exp2(m1 - b1);
      m0 = n0;
      m1 = n1;
#pragma unroll
      for (int jj = 0; jj < 2; ++jj) {
        s[jj][0] = fast_exp2(s[jj][0] - b0);
        s[jj][1] = fast_exp2(s[jj][1] - b0);
        s[jj][2] = fast_exp2(s[jj][2] - b1);
        s[jj][3] = fast_exp2(s[jj][3] - b1);
      }
      l0 = l0 * al0 + (s[0][0] + s[0][1] + s[1][0] + s[1][1]);
      l1 = l1 * al1 + (s[0][2] + s[0][3] + s[1][2] + s[1][3]);
#pragma unroll
      for (int n = 0; n < NTW; ++n) {
        o[n][0] *= al0, o[n][1] *= al0;
        o[n][2] *= al1, o[n][3] *= al1;
      }

      // O += P V: the group's 16 keys are one k16 step (s[0], s[1] as the A fragment); the warp's dim
      // tiles in pairs from one ldmatrix.trans: matrices (keys +0, dims +0), (+8, +0), (+0, +8), (+8, +8).
      uint32_t ph[4], pl[4];
      split_pair(s[0][0], s[0][1], ph[0], pl[0]);
      split_pair(s[0][2], s[0][3], ph[1], pl[1]);
      split_pair(s[1][0], s[1][1], ph[2], pl[2]);
      split_pair(s[1][2], s[1][3], ph[3], pl[3]);
#pragma unroll
      for (int np = 0; np < NTW / 2; ++np) {
        const int vo = (16 * kg + (lane & 7) + ((lane >> 3) & 1) * 8) * LQ + dp * DPW + 16 * np + (lane >> 4) * 8;
        uint32_t bh[4], bl[4] = {0, 0, 0, 0};
        ldsm_x4_trans(bh, Vh + vo);
        if (!v_exact) ldsm_x4_trans(bl, Vl + vo);
#pragma unroll
        for (int nn = 0; nn < 2; ++nn) {
          const uint32_t b_h[2] = {bh[2 * nn], bh[2 * nn + 1]}, b_l[2] = {bl[2 * nn], bl[2 * nn + 1]};
          mma16816(o[2 * np + nn], pl, b_h);
          if (!v_exact) mma16816(o[2 * np + nn], ph, b_l);
          mma16816(o[2 * np + nn], ph, b_h);
        }
      }
    }
  }

  // The rows' l of this thread's key group: the sum over the lanes holding the row (quad; TR: same t4).
#pragma unroll
  for (int x = TR ? 4 : 1; x < (TR ? 32 : 4); x *= 2) {
    l0 += __shfl_xor_sync(0xffffffffu, l0, x);
    l1 += __shfl_xor_sync(0xffffffffu, l1, x);
  }
  stage_wait(0);
  __syncthreads();  // every warp is done with the decoded tiles: the fold reuses their memory

  float* st_o = reinterpret_cast<float*>(Kh);  // [NST][R][HD] each key group's O (unnormalized)
  float* st_ml = st_o + NST * R * HD;          // [NST][R][2] its (m, l), base 2
  float* Os = st_ml + 2 * NST * R;             // [R][LD] outputs (16-byte aligned)
#pragma unroll
  for (int n = 0; n < NTW; ++n) {
    if constexpr (TR) {  // (dim 16 n + g (+8), rows ra, rb)
      const int d = 16 * n + g;
      st_o[(kg * R + ra) * HD + d] = o[n][0];
      st_o[(kg * R + rb) * HD + d] = o[n][1];
      st_o[(kg * R + ra) * HD + d + 8] = o[n][2];
      st_o[(kg * R + rb) * HD + d + 8] = o[n][3];
    } else {  // (rows ra, rb, dims dp DPW + 8 n + 2 t4 (+1))
      const int d = dp * DPW + 8 * n + 2 * t4;
      st_o[(kg * R + ra) * HD + d] = o[n][0];
      st_o[(kg * R + ra) * HD + d + 1] = o[n][1];
      st_o[(kg * R + rb) * HD + d] = o[n][2];
      st_o[(kg * R + rb) * HD + d + 1] = o[n][3];
    }
  }
  if (TR ? g == 0 : (dp == 0 && t4 == 0)) {
    st_ml[(kg * R + ra) * 2] = m0, st_ml[(kg * R + ra) * 2 + 1] = l0;
    st_ml[(kg * R + rb) * 2] = m1, st_ml[(kg * R + rb) * 2 + 1] = l1;
  }
  __syncthreads();

  constexpr float kLn2 = 0.6931471805599453f;
  const bool partial = a.partial;
  const size_t blk = partial_index();
  const int h0 = w.g * a.group + w.j0;
  for (int i = tid; i < R * HD; i += kThreads) {
    const int r = i / HD, d = i - r * HD;
    float M = -INFINITY;
#pragma unroll
    for (int k = 0; k < NST; ++k) M = fmaxf(M, st_ml[(k * R + r) * 2]);
    float ov = 0.0f, L = 0.0f;  // the states in order (fixed: the same bits for the same row)
#pragma unroll
    for (int k = 0; k < NST; ++k) {
      const float mk = st_ml[(k * R + r) * 2], wk = mk == -INFINITY ? 0.0f : fast_exp2(mk - M);
      ov += wk * st_o[(k * R + r) * HD + d];
      L += wk * st_ml[(k * R + r) * 2 + 1];
    }
    if (!partial) {
      Os[r * LD + d] = qhi[r] >= 0 ? ov * row_norm(a, h0 + r % a.gj, M * kLn2, L) : 0.0f;
    } else if (qhi[r] >= 0) {
      a.part_o[(blk * R + r) * HD + d] = ov;
      if (d == 0) {
        a.part_ml[(blk * R + r) * 2] = M * kLn2;
        a.part_ml[(blk * R + r) * 2 + 1] = L;
      }
    }
  }
  if (partial) return;
  __syncthreads();
  write_outputs<HD>(a, w, R, Os, LD, qrow);
}

}  // namespace POLYKV_ATTN_NS
}  // namespace polykv::cuda::attn
