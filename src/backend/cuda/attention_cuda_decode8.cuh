// The lane-per-8-values decode kernel of polykv::cuda::attention (Plan::variant Lanes8 / Lanes8x4,
// head sizes 64 and 128): the same work decomposition, staging (cp.async ring of K/V tiles in shared memory),
// prologue, fold and outputs as decode_kernel (attention_cuda_decode.cuh), with a thread layout that
// needs about half its registers and does no redundant softmax work. docs/CUDA_ATTENTION.md has the
// counts behind it.
//
// Inside a block (R = kDecodeRows rows, LPK = head_dim / 8 lanes per key, KU = LPK / R keys per slot):
//   - a slot is LPK consecutive lanes; lane pl holds dims 8 pl .. 8 pl + 7 of every row's query
//     (R x 8 floats) and of every row's accumulator (R x 8 floats), so q and acc take 16 R registers
//     instead of decode_kernel's 32 R;
//   - per tile the slot takes KU keys; each lane decodes its 8 values of each key (decode8s, the scale
//     applied once to the partial dot) and forms the NP = KU x R = LPK partial dots s[u R + r];
//   - a reduce-scatter over the slot's lanes (LPK - 1 shuffles) leaves lane pl with the full score of
//     pair pl = (key pu = pl / R, row pr = pl % R): masking, softcap and exp run once per pair;
//   - the row's tile max is a max over the KU lanes of the row (log2 KU shuffles); each lane keeps
//     (m, l) of its row pr, l summed over its own keys only (the KU lanes' l are added at the end);
//   - an all-gather (LPK - 1 shuffles) gives every lane all NP probabilities, in the lane-relative
//     order rel[j] = p of pair j ^ pl (static register indices), and an all-gather over the R lanes
//     of a key the rows' rescale factors, also lane-relative: acc[jr] is row jr ^ pr's accumulator;
//   - V: each lane decodes its 8 values of key ju ^ pu and adds rel[ju R + jr] * scale * v to acc[jr].
// Per key and row: 2 x 8 FMAs per lane on values decoded once for all rows; per tile and lane about
// 2 (LPK - 1) + log2 R + log2 KU shuffles for NP = LPK scores.
#pragma once
#include "backend/cuda/attention_cuda_decode.cuh"
#include "backend/cuda/kv_decode_scaled.cuh"
#include "backend/cuda/kv_decode_pairs.cuh"
#include "backend/cuda/kv_decode_trellis.cuh"
#include "backend/cuda/kv_encode_scalar.cuh"

namespace polykv::cuda::attn {
inline namespace POLYKV_ATTN_NS {

template <int HD>
struct Decode8Shape {
  static constexpr int R = kDecodeRows;
  static constexpr int LPK = HD / 8;                // lanes per key
  static constexpr int KPW = 32 / LPK;              // key slots per warp
  static constexpr int NS = KPW * (kThreads / 32);  // key slots per block
  static constexpr int KU = LPK / R;                // keys per slot per tile
  static constexpr int TK = NS * KU;                // keys per tile
  static_assert(decode8_supports(HD) && LPK <= 32 && KU >= 1 && KU * R == LPK);
  static_assert(NS == decode8_slots(HD) && TK == decode8_tile_keys());
  static_assert((R & (R - 1)) == 0 && (KU & (KU - 1)) == 0, "lane-relative indices need powers of two");
};

// Shuffle trees over the lanes of a slot with compile-time offsets (recursion, so that every array
// index is a constant and the arrays stay in registers).
// Reduce-scatter, levels O, O/2, .., 1: lane pl keeps the half of s[0 .. 2 O) selected by its bit O
// and adds its partner's copy of it; in the end s[0] is the full sum of element pl.
template <int O, int N>
__device__ __forceinline__ void reduce_scatter(float (&s)[N], int pl) {
  const bool up = (pl & O) != 0;
#pragma unroll
  for (int i = 0; i < O; ++i) {
    const float send = up ? s[i] : s[i + O], keep = up ? s[i + O] : s[i];
    s[i] = keep + __shfl_xor_sync(0xffffffffu, send, O);
  }
  if constexpr (O > 1) reduce_scatter<O / 2>(s, pl);
}
// All-gather, levels O = 1, 2, .. < END: x[j + O] = the partner's x[j]; with x[0] this lane's value,
// in the end x[j] is the value of lane pl ^ j (lane-relative order).
template <int O, int END, int N>
__device__ __forceinline__ void all_gather(float (&x)[N]) {
  if constexpr (O < END) {
#pragma unroll
    for (int j = 0; j < O; ++j) x[j + O] = __shfl_xor_sync(0xffffffffu, x[j], O);
    all_gather<2 * O, END>(x);
  }
}

// The end of a decode block: folds the ns slot states in shared memory (st_acc [ns][R][HD], st_ml
// [ns][R][2] = m, l) by log-sum-exp into the block's partials (several splits or a shared prefix) or
// its normalized output rows. wgt: [ns][R] scratch; Qs [R][ld] takes the outputs. Every thread must
// call it (it has barriers), after a barrier that follows the last write of the states.
template <int HD>
__device__ void fold_slots(const Args& a, const Work& w, int ns, float* Qs, int ld, const int* qhi, const int* qrow,
                           const float* st_acc, const float* st_ml, float* wgt) {
  constexpr int R = kDecodeRows;
  const int tid = threadIdx.x;
  for (int i = tid; i < ns * R; i += kThreads) {  // i = slot * R + row
    const int r = i % R;
    float M = -INFINITY;
    for (int s = 0; s < ns; ++s) M = fmaxf(M, st_ml[(s * R + r) * 2]);
    const float ms = st_ml[i * 2];
    wgt[i] = ms == -INFINITY ? 0.0f : expf(ms - M);
  }
  __syncthreads();
  const bool partial = a.partial;
  const size_t blk = partial_index();
  for (int i = tid; i < R * HD; i += kThreads) {
    const int r = i / HD, d = i - r * HD;
    float o = 0.0f, L = 0.0f;
    for (int s = 0; s < ns; ++s) {
      const float ws = wgt[s * R + r];
      o += ws * st_acc[(s * R + r) * HD + d];
      L += ws * st_ml[(s * R + r) * 2 + 1];
    }
    if (!partial) {
      Qs[r * ld + d] = qhi[r] >= 0 ? decode_output(a, w, r, o, L, st_ml, ns) : 0.0f;
    } else if (qhi[r] >= 0) {
      a.part_o[(blk * R + r) * HD + d] = o;
      if (d == 0) {
        float M = -INFINITY;
        for (int s = 0; s < ns; ++s) M = fmaxf(M, st_ml[(s * R + r) * 2]);
        a.part_ml[(blk * R + r) * 2] = M;
        a.part_ml[(blk * R + r) * 2 + 1] = L;
      }
    }
  }
  if (partial) return;
  __syncthreads();
  write_outputs<HD>(a, w, R, Qs, ld, qrow);
}

// f(std::integral_constant<KvType, t>{}) for the runtime type t when TI < 0 (every type compiled in); for
// TI >= 0 the kernel is specialized for type KvType(TI) (the launcher only runs it on rows of that type)
// and f sees it at compile time.
template <int TI, class F>
__device__ __forceinline__ void decode8_type(KvType t, F&& f) {
  if constexpr (TI < 0) kv_type_dispatch(t, f);
  else f(std::integral_constant<KvType, KvType(TI)>{});
}
// A piece of a K or V row as v[k] * (returned scale). DEC (kDec8*): decode8s; the packed trellis decoder
// (kv_decode_trellis.cuh); or the pair tables (kv_decode_pairs.cuh, plut) for the turbo / trellis types
// that have one. The same floats in every case, fewer instructions for the turbo types.
template <KvType T, int DEC>
__device__ __forceinline__ float decode8_piece(const uint8_t* row, int c, const float* lut, const float* plut,
                                               float* v, int hd) {
  if constexpr (DEC == kDec8Pairs) return decode8s_pairs<T>(row, c, hd, lut, plut, v);
  else if constexpr (DEC == kDec8Packed) return decode8s_packed<T>(row, c, hd, lut, v);
  else return decode8s<T>(row, c, hd, lut, v);
}

// Pair-table floats (2 per entry) a specialized kernel holds for type TI under DEC (at least 2: no
// zero-sized arrays), and scaled-table floats (kScaledLutSize, or 1 when the pair table replaces it).
template <int DEC, int TI>
POLYKV_HD constexpr int decode8_pair_floats() {
  return DEC == kDec8Pairs && TI >= 0 && pair_lut_size(KvType(TI < 0 ? 0 : TI)) > 0
             ? 2 * pair_lut_size(KvType(TI < 0 ? 0 : TI))
             : 2;
}
template <int DEC, int TI>
POLYKV_HD constexpr int decode8_lut_floats() {
  return decode8_pair_floats<DEC, TI>() > 2 ? 1 : kScaledLutSize;
}

// Early start (Args::early, the launcher's choice: docs/CUDA_ATTENTION.md "Early start"): the kernel
// before this one in the stream is the kv_store of this step's K/V rows, which only writes keys at
// positions >= the sequence's pos0. The block then waits for that grid (griddepcontrol.wait) only
// before it stages the first tile holding such a key, or at its end if none, so the store's latency
// (the trellis Viterbi: ~13 us a layer) overlaps the block's older keys. Every thread waits before it
// exits: this grid never completes before the store (the kernels after it rely on that order).
__device__ __forceinline__ void pdl_wait_prev() {
#if !defined(POLYKV_ATTN_EMULATION) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_launch_next() {
#if !defined(POLYKV_ATTN_EMULATION) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// The start of a lanes8 or tensor-core decode block: enters the grid's PDL order (early start: launches its
// dependents first and waits later, see above), finds the block's work w and its split's keys [kb, ke).
// false: nothing to do here (no work item, or a split with no key of the block, which the merge skips too);
// the block has waited for the previous grid and must return.
__device__ __forceinline__ bool decode_block_begin(const Args& a, Work& w, int& kb, int& ke) {
  const bool early = a.early != 0;
  if (early) pdl_launch_next();
  else pdl_enter();
  prefetch_sequence(a);
  if (!block_work(a, blockIdx.y, blockIdx.z, w)) {
    if (early) pdl_wait_prev();
    return false;
  }
  kb = split_begin(a, w, int(blockIdx.x));
  ke = split_end(a, w, int(blockIdx.x));
  if (kb >= ke) {
    if (early) pdl_wait_prev();
    return false;
  }
  return true;
}

// Self-encoded new rows (Args::self_kv, early start only; decode8_kernel below): the tile holding the step's new keys
// is staged at once (its older rows are final; the new rows may still be being written) and the new keys' K (and V)
// rows are encoded into the stage from the step's f32 rows with kv_store's encoders (kv_encode_scalar.cuh's
// encode_plain_lane: the same bytes), so the block need not wait for the store before that tile. V of a type the
// block cannot encode (turbo, trellis) is waited for after the tile's scores and softmax, then copied from the pool
// into the stage before the V products.

// MINB: blocks per multiprocessor the register allocation must allow (decode8_min_blocks, or
// decode8_fixed_min_blocks for the specialized kernels). KTI / VTI: -1 (any K / V type, dispatched per
// tile), or the KvType the kernel is specialized for (attention_cuda_decode8_fixed.cuh). DEC: the piece
// decoder (kDec8Plain / kDec8Packed / kDec8Pairs; pairs only in the specialized kernels). SELF: 1 compiles the
// self-encoded rows (Args::self_kv), 0 leaves them out (a.self_kv must be 0): the lean kernels of decode8_lean_pair.
template <int HD, int MINB, int KTI = -1, int VTI = -1, int DEC = kDec8Plain, int SELF = 1>
__global__ void __launch_bounds__(kThreads, MINB) decode8_kernel(const Args a) {
  using Sh = Decode8Shape<HD>;
  constexpr int R = Sh::R, LD = HD + 4, LPK = Sh::LPK, KPW = Sh::KPW, NS = Sh::NS, KU = Sh::KU, TK = Sh::TK;
  constexpr int NP = KU * R;
  static_assert(DEC != kDec8Pairs || (KTI >= 0 && VTI >= 0), "pair tables only in the specialized kernels");

  const bool early = a.early != 0;
  Work w;
  int kb, ke;
  if (!decode_block_begin(a, w, kb, ke)) return;
  // Early start: keys from new_lo on may be written by the store still running; waited: done waiting.
  const int new_lo = early ? w.pos_a - w.qa : 0x7fffffff;
  bool waited = !early;
  // Self-encoded new rows (above): K always when self_kv is set, V when bit 1 is.
  // V of a type the kernel can encode itself (kv_encode_scalar.cuh's encode_plain_lane; as self_encodable).
  constexpr bool kSelfV = VTI < 0 || VTI == int(KvType::F32) || VTI == int(KvType::F16) || VTI == int(KvType::BF16) ||
                          VTI == int(KvType::Q8_0) || VTI == int(KvType::Q4_0);
#if defined(POLYKV_ATTN_EMULATION)
  static_assert(kSelfV == (VTI < 0 || self_encodable(KvType(VTI < 0 ? 0 : VTI))), "kSelfV is self_encodable");
#endif
  const bool self_k = SELF != 0 && early && (a.self_kv & 1) != 0, self_v = self_k && (a.self_kv & 2) != 0;

  __shared__ __align__(16) float Qs[R * LD];  // queries, then the block's outputs
  __shared__ int qhi[R], qlo[R], qrow[R];
  __shared__ float lvk[32], lvv[32];
  // scaled_lut_entry tables of K and V; with DEC = kDec8Pairs the pair tables of K and V (one when
  // K and V share a type) replace those of the types that have one.
  constexpr int PKF = decode8_pair_floats<DEC, KTI>(), PVF = decode8_pair_floats<DEC, VTI>();
  constexpr bool kSharePairs = KTI == VTI && PKF > 2;
  __shared__ float lutk[decode8_lut_floats<DEC, KTI>()], lutv[decode8_lut_floats<DEC, VTI>()];
  __shared__ __align__(16) float pairk[PKF];
  __shared__ __align__(16) float pairv_own[kSharePairs ? 2 : PVF];
  float* const pairv = kSharePairs ? pairk : pairv_own;
  __shared__ float wgt[NS * R];  // [slot][row] weight of each slot's state in the fold
  __shared__ int st_t0[kDecodeMaxStages], st_nk[kDecodeMaxStages], st_ko[kDecodeMaxStages], st_vo[kDecodeMaxStages];
  __shared__ int st_new[kDecodeMaxStages];  // self-encoded rows: the stage's tile holds new keys (patched after landing)
  POLYKV_DYNAMIC_SHARED(smem4);
  uint8_t* stages = reinterpret_cast<uint8_t*>(smem4);  // [a.stages][K part | V part] tiles of raw rows
  const size_t kpart = a.stage_k_bytes, spart = a.stage_bytes;
  const int S = a.stages;
  float* st_acc = reinterpret_cast<float*>(smem4);  // after the tiles: [NS][R][HD] slot states: acc
  float* st_ml = st_acc + NS * R * HD;              // [NS][R][2]: m, l

  const int32_t* table = a.tables + a.table_start[w.seq];
  const int bt = a.block_tokens;
  const size_t head_row = size_t(w.g) * size_t(bt);
  // The producer, as decode_kernel's: one commit group per call (empty past ke).
  int p_tiles = 0, p_key = kb;
  // The specialized kernels (KTI >= 0) keep the producer's pool block (p_bi, its end p_bend) and stage
  // (p_st) incrementally instead of a division and a remainder per tile: a tile never crosses a pool
  // block, so p_key reaches p_bend exactly when the block is done. The generic kernel stays as it was.
  constexpr bool kIncremental = KTI >= 0;
  int p_bi = kIncremental ? kb / bt : 0, p_bend = kIncremental ? (p_bi + 1) * bt : 0, p_st = 0;
  const auto issue = [&]() {
    if (p_key < ke) {
      if constexpr (kIncremental) {
        if (p_key >= p_bend) {
          ++p_bi;
          p_bend += bt;
        }
      }
      const int bi = kIncremental ? p_bi : p_key / bt;
      const int t1 = min(min(p_key + TK, ke), kIncremental ? p_bend : (bi + 1) * bt), nk = t1 - p_key;
      const bool holds_new = t1 > new_lo;
      if (!waited && holds_new && !self_k) {  // early start: this tile holds a key the store writes
        pdl_wait_prev();
        waited = true;
      }
      const uint8_t* base = a.base + size_t(table[bi]) * a.block_stride;
      const size_t row = head_row + size_t(p_key - bi * bt);
      const uint8_t* ks = base + row * a.k_row_bytes;
      const uint8_t* vs = base + a.v_offset + row * a.v_row_bytes;
      const int st = kIncremental ? p_st : p_tiles % S;
      uint8_t* dst = stages + size_t(st) * spart;
      stage_copy(dst, ks, size_t(nk) * a.k_row_bytes);
      stage_copy(dst + kpart, vs, size_t(nk) * a.v_row_bytes);
      if (threadIdx.x == 0) {
        st_t0[st] = p_key;
        st_nk[st] = nk;
        st_ko[st] = int(reinterpret_cast<uintptr_t>(ks) & 15u);
        st_vo[st] = int(reinterpret_cast<uintptr_t>(vs) & 15u);
        st_new[st] = self_k && holds_new ? 1 : 0;
      }
      p_key = t1;
    }
    ++p_tiles;
    if constexpr (kIncremental) p_st = p_st + 1 == S ? 0 : p_st + 1;
    stage_commit();
  };
  for (int i = 0; i < S - 1; ++i) issue();

  block_prologue<HD>(a, w, R, Qs, LD, qhi, qlo, qrow, lvk, lvv);
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int ks = lane / LPK, pl = lane - ks * LPK;  // slot in the warp; lane in the slot (8-value piece)
  const int slot = warp * KPW + ks;
  const int pu = pl / R, pr = pl % R;  // the (key, row) pair whose full score this lane owns
  const int my_qh = qhi[pr], my_ql = qlo[pr];

  float q[R][8], acc[R][8];  // q: row r; acc[jr]: row jr ^ pr (lane-relative)
  float m = -INFINITY, l = 0.0f;  // row pr: running max (same on the row's KU lanes), this lane's sum
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      q[r][k] = Qs[r * LD + 8 * pl + k];
      acc[r][k] = 0.0f;
    }
  // Row strides: compile-time constants in the specialized kernels.
  const size_t krb = KTI < 0 ? a.k_row_bytes : size_t(kv_row_bytes_const(KvType(KTI < 0 ? 0 : KTI), HD));
  const size_t vrb = VTI < 0 ? a.v_row_bytes : size_t(kv_row_bytes_const(KvType(VTI < 0 ? 0 : VTI), HD));
  const uint32_t subset_word = g_tables.subset_word;
  if constexpr (decode8_lut_floats<DEC, KTI>() == kScaledLutSize)
    for (int i = tid; i < kScaledLutSize; i += kThreads)  // read after the first tile's barrier
      lutk[i] = scaled_lut_entry(a.k_type, lvk, subset_word, i);
  if constexpr (decode8_lut_floats<DEC, VTI>() == kScaledLutSize)
    for (int i = tid; i < kScaledLutSize; i += kThreads)
      lutv[i] = scaled_lut_entry(a.v_type, lvv, subset_word, i);
  if constexpr (PKF > 2)
    for (int i = tid; i < PKF / 2; i += kThreads)
      pair_lut_entry(KvType(KTI < 0 ? 0 : KTI), lvk, subset_word, i, pairk[2 * i], pairk[2 * i + 1]);
  if constexpr (PVF > 2 && !kSharePairs)
    for (int i = tid; i < PVF / 2; i += kThreads)
      pair_lut_entry(KvType(VTI < 0 ? 0 : VTI), lvv, subset_word, i, pairv_own[2 * i], pairv_own[2 * i + 1]);

  for (int it = 0, c_st = 0, key = kb; key < ke; ++it, c_st = c_st + 1 == S ? 0 : c_st + 1) {
    stage_wait(S - 2);
    __syncthreads();
    issue();
    const int st = kIncremental ? c_st : it % S;
    const int t0 = st_t0[st], nk = st_nk[st];
    key = t0 + nk;
    uint8_t* const kbuf = stages + size_t(st) * spart + st_ko[st];
    uint8_t* const vbuf = stages + size_t(st) * spart + kpart + st_vo[st];
    const int i0 = slot * KU;  // the slot's first key in the tile
    // Self-encoded new rows: the stage has landed (the barrier above); a warp a new key writes its K (and V) row
    // over whatever the copy brought. Block-uniform: st_new was written before that barrier.
    const bool patched = SELF != 0 && st_new[st] != 0;
    if (patched) {
      const int n_kv = a.n_head / a.group, first = max(t0, new_lo), row0 = a.row0[w.seq];
      for (int key = first + warp; key < t0 + nk; key += kThreads / 32) {
        const size_t xrow = (size_t(row0 + key - new_lo) * size_t(n_kv) + size_t(w.g)) * HD;
        // The specialized kernels' types as constants: the encoder's switch folds to the one type (with a.k_type the
        // whole switch was inlined, and the fat kernels spilled up to 104 bytes; ptxas -v, 2026-12-07e).
        enc::encode_plain_lane(lane, KTI >= 0 ? KvType(KTI) : a.k_type, HD, a.new_k + xrow,
                               kbuf + size_t(key - t0) * krb);
        if (self_v && kSelfV)
          enc::encode_plain_lane(lane, VTI >= 0 ? KvType(VTI) : a.v_type, HD, a.new_v + xrow,
                                 vbuf + size_t(key - t0) * vrb);
      }
      __syncthreads();
    }

    // Partial dots of this lane's 8 dims: s[u R + r] for key i0 + u, row r.
    float s[NP];
    decode8_type<KTI>(a.k_type, [&](auto tag) {
      constexpr KvType T = decltype(tag)::value;
#pragma unroll
      for (int u = 0; u < KU; ++u) {
        float kv[8], sc = 0.0f;
        if (i0 + u < nk) {
          sc = decode8_piece<T, DEC>(kbuf + size_t(i0 + u) * krb, pl, lutk, pairk, kv, HD);
        } else {
#pragma unroll
          for (int k = 0; k < 8; ++k) kv[k] = 0.0f;
        }
#pragma unroll
        for (int r = 0; r < R; ++r) {
          float d0 = 0.0f, d1 = 0.0f;  // two chains
#pragma unroll
          for (int k = 0; k < 8; k += 2) {
            d0 += q[r][k] * kv[k];
            d1 += q[r][k + 1] * kv[k + 1];
          }
          s[u * R + r] = (d0 + d1) * sc;
        }
      }
    });
    reduce_scatter<LPK / 2>(s, pl);  // s[0]: the full score of pair pl
    // This lane's pair: key i0 + pu (position t0 + i0 + pu), row pr.
    float x = s[0];
    if (a.softcap > 0.0f) x = a.softcap * tanhf(x / a.softcap);
    const int pos = t0 + i0 + pu;
    x = i0 + pu < nk && pos <= my_qh && pos >= my_ql ? x : -INFINITY;
    float mt = x;
#pragma unroll
    for (int o = R; o < LPK; o *= 2) mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, o));
    const float m_new = fmaxf(m, mt);
    // Every key of the row masked so far: m stays -inf, p = 0 and acc (zero) needs no rescale.
    const float alpha = m_new == -INFINITY ? 1.0f : fast_exp(m - m_new);
    const float p = m_new == -INFINITY ? 0.0f : fast_exp(x - m_new);
    m = m_new;
    l = l * alpha + p;

    // All-gathers, lane-relative: rel[j] = p of pair j ^ pl; al[jr] = alpha of row jr ^ pr.
    float rel[NP], al[R];
    rel[0] = p;
    all_gather<1, LPK>(rel);
    al[0] = alpha;
    all_gather<1, R>(al);
#pragma unroll
    for (int jr = 0; jr < R; ++jr)
      if (al[jr] != 1.0f)
#pragma unroll
        for (int k = 0; k < 8; ++k) acc[jr][k] *= al[jr];

    if (patched && !self_v) {  // V the block cannot encode: wait for the store, then its new rows into the stage
      if (!waited) {
        pdl_wait_prev();
        waited = true;
      }
      const int first = max(t0, new_lo), n_new = t0 + nk - first;
      const size_t vb = size_t(vrb);
      for (int i = tid; i < n_new * int(vb); i += kThreads) {
        const int key = first + i / int(vb), byte = i - (i / int(vb)) * int(vb);
        const int bi = key / bt;
        const uint8_t* src = a.base + size_t(table[bi]) * a.block_stride + a.v_offset +
                             (head_row + size_t(key - bi * bt)) * vb;
        vbuf[size_t(key - t0) * vb + size_t(byte)] = src[byte];
      }
      __syncthreads();
    }
    decode8_type<VTI>(a.v_type, [&](auto tag) {
      constexpr KvType T = decltype(tag)::value;
#pragma unroll
      for (int ju = 0; ju < KU; ++ju) {
        const int i = i0 + (ju ^ pu);  // pairs ju R + jr of rel are key ju ^ pu, rows jr ^ pr
        if (i >= nk) continue;       // past the tile (its probabilities are 0; its bytes are junk)
        float v[8];
        const float sc = decode8_piece<T, DEC>(vbuf + size_t(i) * vrb, pl, lutv, pairv, v, HD);
#pragma unroll
        for (int jr = 0; jr < R; ++jr) {
          const float ps = rel[ju * R + jr] * sc;
#pragma unroll
          for (int k = 0; k < 8; ++k) acc[jr][k] += ps * v[k];
        }
      }
    });
  }
  // The row's l: the sum over its KU lanes.
#pragma unroll
  for (int o = R; o < LPK; o *= 2) l += __shfl_xor_sync(0xffffffffu, l, o);
  stage_wait(0);
  if (!waited) pdl_wait_prev();  // early start, no key of the store in this block: wait before the end
  __syncthreads();  // every thread is done with the stages: the fold reuses their memory

#pragma unroll
  for (int jr = 0; jr < R; ++jr)
#pragma unroll
    for (int k = 0; k < 8; ++k) st_acc[(slot * R + (jr ^ pr)) * HD + 8 * pl + k] = acc[jr][k];
  if (pu == 0) {
    st_ml[(slot * R + pr) * 2] = m;
    st_ml[(slot * R + pr) * 2 + 1] = l;
  }
  __syncthreads();
  fold_slots<HD>(a, w, NS, Qs, LD, qhi, qrow, st_acc, st_ml, wgt);
}

}  // namespace POLYKV_ATTN_NS
}  // namespace polykv::cuda::attn
