// The tensor-core prefill kernel of polykv::cuda::attention (Plan::mma: the tiled plan's large
// shape, 64 rows per block, head sizes 64, 128 and 256): the same work decomposition, prologue, masking,
// online softmax, split partials and outputs as attention_kernel (attention_cuda_kernels.cuh), with
// both products on mma.sync.m16n8k16 (f16 inputs, f32 accumulation).
//
// Exactness: a float x is split into hi = f16(x) and lo = f16(x - hi); a product is
// hi·hi' + hi·lo' + lo·hi' (three MMAs; the dropped lo·lo' is ~2^-22 relative), so scores and
// outputs keep about f32 accuracy and the kernel meets the same 1e-4 bound as the f32 kernels.
// Values beyond f16's range (|x| > 65504) would overflow: queries and K/V values of real models are
// far below it.
//
// Per block: 4 warps x 16 rows. Per tile of kTileKeys = 32 keys: the block decodes K into f16 hi/lo
// rows [key][dim] and V transposed into hi/lo [dim][key] in shared memory (decode8, never an f16
// copy of the cache), then each warp computes S = Q K^T for its 16 rows (A = Q from shared memory,
// B = K rows), masks and folds S into its rows' online softmax in registers, and adds P V with the
// accumulator of S reused as the A fragment of P (FlashAttention-2's register layout: the C
// fragments of two adjacent 8-key tiles are the A fragment of a 16-key step).
//
// Fragment layouts of mma.m16n8k16 (g = lane / 4, t = lane % 4; two f16 per 32-bit register, the
// lower index in the low half): A (16 x 16, row-major) a0 = (g, 2t..2t+1), a1 = (g+8, 2t..),
// a2 = (g, 2t+8..), a3 = (g+8, 2t+8..); B (16 x 8, k x n) b0 = (k 2t..2t+1, n g), b1 = (k 2t+8.., n g);
// C (16 x 8) c0, c1 = (g, 2t..2t+1), c2, c3 = (g+8, 2t..2t+1).
#pragma once
#include "backend/cuda/attention_cuda_kernels.cuh"
#include "backend/cuda/half_split.cuh"
#if !defined(POLYKV_ATTN_EMULATION)
#include "backend/cuda/mma_fragments.cuh"
#endif

namespace polykv::cuda::attn {
inline namespace POLYKV_ATTN_NS {

// d += A B for one m16n8k16 tile (fragments as above; mma_fragments.cuh's wrapper, the emulation's
// warp-wide product in the CPU test).
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if defined(POLYKV_ATTN_EMULATION)
  POLYKV_EMU_MMA(d, a, b);
#else
  mma::m16n8k16(d, a, b[0], b[1]);
#endif
}
// d += A B with A and B given as hi/lo pairs: the three products that matter.
__device__ __forceinline__ void mma3(float (&d)[4], const uint32_t (&ah)[4], const uint32_t (&al)[4],
                                     const uint32_t (&bh)[2], const uint32_t (&bl)[2]) {
  mma16816(d, al, bh);
  mma16816(d, ah, bl);
  mma16816(d, ah, bh);
}

constexpr int kMmaRows = kMmaTiledRows;  // rows per block (4 warps x 16)
// Row strides in f16 elements: Q and K rows of hd (+8: conflict-free fragment loads), V^T rows of
// kTileKeys keys (+8).
POLYKV_HD constexpr int mma_ldq(int hd) { return hd + 8; }
constexpr int kMmaLdv = kTileKeys + 8;
// Bytes of the region holding the K and V^T tiles (hi and lo), which first holds the f32 queries of
// the prologue ([kMmaRows][hd + 4]) and at the end the outputs.
POLYKV_HD constexpr size_t mma_tile_bytes(int hd) {
  const size_t kv = 2 * size_t(kTileKeys) * mma_ldq(hd) * 2 + 2 * size_t(hd) * kMmaLdv * 2;
  const size_t qs = size_t(kMmaRows) * (size_t(hd) + 4) * 4;
  return kv > qs ? kv : qs;
}
// Shared memory of attention_mma_kernel<hd>: Q hi/lo, the tile region, row addresses.
POLYKV_HD constexpr size_t mma_smem_bytes(int hd) {
  return 2 * size_t(kMmaRows) * mma_ldq(hd) * 2 + mma_tile_bytes(hd) + 2 * kTileKeys * sizeof(uint64_t);
}

template <int HD>
__global__ void __launch_bounds__(kThreads, 2) attention_mma_kernel(const Args a) {
  constexpr int T = kTileKeys, R = kMmaRows, LD = HD + 4, LQ = mma_ldq(HD), LV = kMmaLdv;
  constexpr int NT = HD / 8;  // 8-wide output tiles of a row
  static_assert(T == 32 && kThreads == 128 && (HD == 64 || HD == 128 || HD == 256) && kMmaRows == 64);

  pdl_enter();
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
  float* Qs = reinterpret_cast<float*>(region);        // [R][LD] f32 queries (prologue), outputs (end)
  uint64_t* kp = reinterpret_cast<uint64_t*>(region + mma_tile_bytes(HD));  // [T] K row addresses
  uint64_t* vp = kp + T;                                                    // [T] V row addresses

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, t4 = lane % 4;
  block_prologue<HD>(a, w, R, Qs, LD, qhi, qlo, qrow, lvk, lvv);
  for (int i = tid; i < R * HD; i += kThreads) {
    const int r = i / HD, d = i - r * HD;
    uint32_t hi, lo;
    split_half(Qs[r * LD + d], hi, lo);
    Qh[r * LQ + d] = uint16_t(hi);
    Ql[r * LQ + d] = uint16_t(lo);
  }
  // (The first tile's barrier orders these reads of Qs before the tiles overwrite the region.)

  const int r0 = warp * 16 + g, r1 = r0 + 8;  // this thread's rows (C fragment rows g, g + 8)
  const int qh0 = qhi[r0], ql0 = qlo[r0], qh1 = qhi[r1], ql1 = qlo[r1];
  float o[NT][4];
#pragma unroll
  for (int n = 0; n < NT; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;  // l: this thread's keys only
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
    __syncthreads();  // row addresses ready; everyone is done with the previous tile (and with Qs)
    // K: consecutive threads take consecutive pieces of a key (coalesced reads, contiguous stores).
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
    // V transposed: consecutive threads take consecutive keys of a piece (conflict-free stores).
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

    // S = Q K^T for rows r0, r1 and keys 8j + 2 t4 (+1).
    float s[4][4];
#pragma unroll
    for (int j = 0; j < 4; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < HD / 16; ++ks) {
      const int c0 = 16 * ks + 2 * t4;
      uint32_t ah[4], al[4];
      ah[0] = *reinterpret_cast<const uint32_t*>(Qh + r0 * LQ + c0);
      ah[1] = *reinterpret_cast<const uint32_t*>(Qh + r1 * LQ + c0);
      ah[2] = *reinterpret_cast<const uint32_t*>(Qh + r0 * LQ + c0 + 8);
      ah[3] = *reinterpret_cast<const uint32_t*>(Qh + r1 * LQ + c0 + 8);
      al[0] = *reinterpret_cast<const uint32_t*>(Ql + r0 * LQ + c0);
      al[1] = *reinterpret_cast<const uint32_t*>(Ql + r1 * LQ + c0);
      al[2] = *reinterpret_cast<const uint32_t*>(Ql + r0 * LQ + c0 + 8);
      al[3] = *reinterpret_cast<const uint32_t*>(Ql + r1 * LQ + c0 + 8);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint16_t* kh = Kh + (8 * j + g) * LQ + c0;
        const uint16_t* kl = Kl + (8 * j + g) * LQ + c0;
        const uint32_t bh[2] = {*reinterpret_cast<const uint32_t*>(kh), *reinterpret_cast<const uint32_t*>(kh + 8)};
        const uint32_t bl[2] = {*reinterpret_cast<const uint32_t*>(kl), *reinterpret_cast<const uint32_t*>(kl + 8)};
        mma3(s[j], ah, al, bh, bl);
      }
    }

    // Mask, softcap, online softmax of rows r0 (s[j][0..1]) and r1 (s[j][2..3]).
    float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = 8 * j + 2 * t4 + (e & 1), pos = t0 + key;
        float x = s[j][e];
        if (a.softcap > 0.0f) x = a.softcap * tanhf(x / a.softcap);
        const bool vis = key < nk && (e < 2 ? pos <= qh0 && pos >= ql0 : pos <= qh1 && pos >= ql1);
        x = vis ? x : -INFINITY;
        s[j][e] = x;
        if (e < 2) mx0 = fmaxf(mx0, x);
        else mx1 = fmaxf(mx1, x);
      }
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
    const float n0 = fmaxf(m0, mx0), n1 = fmaxf(m1, mx1);
    // All keys of a row masked so far: m stays -inf, p = 0 (no exp(-inf - -inf)).
    const float al0 = n0 == -INFINITY ? 1.0f : expf(m0 - n0), al1 = n1 == -INFINITY ? 1.0f : expf(m1 - n1);
    m0 = n0;
    m1 = n1;
    float sum0 = 0.0f, sum1 = 0.0f;
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float mm = e < 2 ? n0 : n1;
        const float p = mm == -INFINITY ? 0.0f : expf(s[j][e] - mm);
        s[j][e] = p;
        if (e < 2) sum0 += p;
        else sum1 += p;
      }
    l0 = l0 * al0 + sum0;
    l1 = l1 * al1 + sum1;
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      o[n][0] *= al0, o[n][1] *= al0;
      o[n][2] *= al1, o[n][3] *= al1;
    }

    // O += P V: key steps of 16 (the S tiles 2 kk and 2 kk + 1 as the A fragment), 8-wide dim tiles.
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
      uint32_t ph[4], pl[4];
      split_pair(s[2 * kk][0], s[2 * kk][1], ph[0], pl[0]);
      split_pair(s[2 * kk][2], s[2 * kk][3], ph[1], pl[1]);
      split_pair(s[2 * kk + 1][0], s[2 * kk + 1][1], ph[2], pl[2]);
      split_pair(s[2 * kk + 1][2], s[2 * kk + 1][3], ph[3], pl[3]);
      const int k0 = 16 * kk + 2 * t4;
#pragma unroll
      for (int n = 0; n < NT; ++n) {
        const uint16_t* vh = Vh + (8 * n + g) * LV + k0;
        const uint16_t* vl = Vl + (8 * n + g) * LV + k0;
        const uint32_t bh[2] = {*reinterpret_cast<const uint32_t*>(vh), *reinterpret_cast<const uint32_t*>(vh + 8)};
        const uint32_t bl[2] = {*reinterpret_cast<const uint32_t*>(vl), *reinterpret_cast<const uint32_t*>(vl + 8)};
        mma3(o[n], ph, pl, bh, bl);
      }
    }
  }

  // The rows' l: the sum over the 4 threads of the quad.
  l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
  l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
  if (!a.partial) {
    __syncthreads();  // every warp is done with the tiles: Qs (the same memory) takes the outputs
    const int h0 = w.g * a.group + w.j0;  // m0, m1: the rows' max over every key (quad-uniform)
    const float inv0 = qh0 >= 0 ? row_norm(a, h0 + r0 % a.gj, m0, l0) : 0.0f;
    const float inv1 = qh1 >= 0 ? row_norm(a, h0 + r1 % a.gj, m1, l1) : 0.0f;
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      const int d = 8 * n + 2 * t4;
      Qs[r0 * LD + d] = o[n][0] * inv0;
      Qs[r0 * LD + d + 1] = o[n][1] * inv0;
      Qs[r1 * LD + d] = o[n][2] * inv1;
      Qs[r1 * LD + d + 1] = o[n][3] * inv1;
    }
    __syncthreads();
    write_outputs<HD>(a, w, R, Qs, LD, qrow);
    return;
  }
  const size_t blk = partial_index();
  float* po = a.part_o + blk * R * HD;
#pragma unroll
  for (int n = 0; n < NT; ++n) {
    const int d = 8 * n + 2 * t4;
    if (qh0 >= 0) po[r0 * HD + d] = o[n][0], po[r0 * HD + d + 1] = o[n][1];
    if (qh1 >= 0) po[r1 * HD + d] = o[n][2], po[r1 * HD + d + 1] = o[n][3];
  }
  if (t4 == 0) {
    if (qh0 >= 0) a.part_ml[(blk * R + r0) * 2] = m0, a.part_ml[(blk * R + r0) * 2 + 1] = l0;
    if (qh1 >= 0) a.part_ml[(blk * R + r1) * 2] = m1, a.part_ml[(blk * R + r1) * 2 + 1] = l1;
  }
}

}  // namespace POLYKV_ATTN_NS
}  // namespace polykv::cuda::attn
