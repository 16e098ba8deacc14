// The kernels of polykv::cuda::attention (kv_cuda.h); the launcher is attention_cuda.cu.
//
// One thread block computes one (work item, key split):
//   work item = (sequence, KV head g, head part, query tile): the rows r = t * gj + jj of the block are
//   query token qa + t of the sequence with query head g * group + j0 + jj (t < qt, jj < gj), so the
//   GQA group's heads and a few consecutive tokens share every K/V tile the block reads;
//   key split s = key positions [s * chunk, (s + 1) * chunk) (one split: every visible key).
// Per tile of kTileKeys keys: the block decodes K from its stored type into an f32 tile in shared
// memory (never the whole cache), scores it against the rows' queries (already scaled, and rotated
// into K's basis for turbo K), masks (causal, window, beyond the sequence), folds the tile into an
// online softmax (m, l) per row, decodes V into the same tile and accumulates p · V in registers
// (in V's basis). With one split the block normalizes, rotates back for turbo V and writes the
// output rows; otherwise it writes its partial (m, l, unnormalized acc) and merge_kernel folds the
// splits of each row by log-sum-exp.
//
// Lengths are read on the device (pos0, n_q of AttentionBatchDevice): blocks whose query tile or key
// split lies beyond the sequence exit at once, and merge_kernel recomputes which splits wrote (the
// same function of the same device values), so a captured graph stays right when lengths change
// under the host bounds.
//
// The kernels also compile as plain C++ for the CPU emulation test
// (tests/cuda/attention_cuda_emulation_test.cpp), which defines POLYKV_ATTN_EMULATION, maps the CUDA
// keywords and built-ins onto threads and barriers, and names the inline namespace differently so its
// symbols never meet the device build's.
#pragma once
#include <cstdint>

#include "backend/cuda/attention_cuda_plan.h"
#include "backend/cuda/kv_decode.cuh"

#if !defined(POLYKV_ATTN_EMULATION)
#define POLYKV_ATTN_NS device
// Dynamic shared memory of a kernel, as an array of float4.
#define POLYKV_DYNAMIC_SHARED(name) extern __shared__ float4 name[]
#endif

namespace polykv::cuda::attn {
inline namespace POLYKV_ATTN_NS {

// The tables the decoders read (uploaded once per device by the launcher). Internal linkage: this
// header belongs to one translation unit, attention_cuda.cu (no relocatable device code).
static __device__ KvDecodeTables g_tables;

// Programmatic dependent launch (sm_90; attn::attention_pdl()): the launcher may start an attention
// kernel while the kernel before it drains. Every attention kernel calls this first, before any
// read and before any early exit: it waits until the previous grid has completed (q, the new K/V
// rows) and then lets the next grid's launch begin (that grid still waits for this one's completion
// in its own griddepcontrol.wait, so the order of memory effects is unchanged). A no-op for a launch
// without the attribute, before sm_90 and in the CPU emulation.
__device__ __forceinline__ void pdl_enter() {
#if !defined(POLYKV_ATTN_EMULATION) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Brings the lengths and table offset of the block's sequence into L1 at once (decode kernels, not
// the prefix pass): block_work, the first tile's address and block_token read them one after another
// behind data-dependent branches, so without this each is a separate round trip to L2 or memory at
// the start of every block (2026-12-01c). A hint only: no effect on results; a no-op in the emulation.
__device__ __forceinline__ void prefetch_sequence(const Args& a) {
#if !defined(POLYKV_ATTN_EMULATION) && defined(__CUDA_ARCH__)
  if (a.prefix_pass || threadIdx.x >= 4) return;
  const int seq = int(blockIdx.z) / a.qtiles;
  const int32_t* p = threadIdx.x == 0 ? a.n_q + seq : threadIdx.x == 1 ? a.pos0 + seq
                   : threadIdx.x == 2 ? a.table_start + seq : a.row0 + seq;
  asm volatile("prefetch.global.L1 [%0];" ::"l"(p));
#else
  (void)a;
#endif
}

// What one (y, z) grid cell computes; false when its query tile lies beyond the sequence (or the
// group, in the prefix pass).
struct Work {
  int seq, g, j0, nj;  // sequence (prefix pass: the group's first, whose table holds the prefix),
                       // KV head, first head of the part, heads in the part
  int qa, nt;          // first query token (index in the sequence's queries; prefix pass: in the
                       // group's queries, sequence after sequence), tokens
  int pos_a;           // position of query token qa (not in the prefix pass)
  int kv_lo, kv_hi;    // keys some row of the block sees: [kv_lo, kv_hi) (may be empty)
};

// The shared prefix of sequence seq: its length in keys (0: none) and its group (-1: none).
__device__ __forceinline__ int prefix_of(const Args& a, int seq, int& group) {
  for (int i = 0; i < a.n_prefix; ++i) {
    const int s0 = a.prefix_seq0[i];
    if (seq >= s0 && seq < s0 + a.prefix_n_seq[i]) {
      group = i;
      return a.prefix_blocks[i] * a.block_tokens;
    }
  }
  group = -1;
  return 0;
}

__device__ __forceinline__ bool block_work(const Args& a, int y, int z, Work& w) {
  w.g = y / a.hparts;
  const int hp = y - w.g * a.hparts;
  w.j0 = hp * a.gj;
  w.nj = min(a.gj, a.group - w.j0);
  const int tile = z % a.qtiles;
  w.qa = tile * a.qt;
  if (a.prefix_pass) {
    const int grp = z / a.qtiles, n = a.prefix_n_seq[grp], prefix = a.prefix_blocks[grp] * a.block_tokens;
    if (n <= 0 || prefix <= 0) return false;
    w.seq = a.prefix_seq0[grp];
    int total = 0;
    for (int s = 0; s < n; ++s) total += a.n_q[w.seq + s];
    if (w.qa >= total || w.nj <= 0) return false;
    w.nt = min(a.qt, total - w.qa);
    w.pos_a = -1;
    w.kv_lo = 0;
    w.kv_hi = prefix;
    return true;
  }
  w.seq = z / a.qtiles;
  const int nq = a.n_q[w.seq];
  if (w.qa >= nq || w.nj <= 0 || nq < a.nq_lo || nq > a.nq_hi) return false;  // (another launch's sequence)
  w.nt = min(a.qt, nq - w.qa);
  w.pos_a = a.pos0[w.seq] + w.qa;
  w.kv_lo = a.window > 0 ? max(0, w.pos_a - a.window + 1) : 0;
  w.kv_hi = w.pos_a + w.nt;
  if (a.n_prefix > 0) {  // the group's prefix keys are the prefix pass's
    int grp;
    w.kv_lo = max(w.kv_lo, prefix_of(a, w.seq, grp));
  }
  return true;
}

// Where split 0 of the block's keys starts: key 0, or (Args::window_splits) the block's first visible key aligned
// down to kWindowSplitAlign keys, so that a sliding-window layer's splits cover its window, not the whole context.
__device__ __forceinline__ int split_origin(const Args& a, const Work& w) {
  return a.window_splits ? w.kv_lo - w.kv_lo % kWindowSplitAlign : 0;
}
// The first key the decode kernels read in key split `split` of the block (Args::invariant): the split's
// start or the block's first visible key, whichever is later; aligned, the pool block holding that key
// instead of the key itself (the keys before it in that block are masked like any invisible key).
__device__ __forceinline__ int split_begin(const Args& a, const Work& w, int split) {
  const int lo = a.invariant ? w.kv_lo - w.kv_lo % a.block_tokens : w.kv_lo;
  return max(lo, split_origin(a, w) + split * a.chunk);
}
// One past the last key the decode kernels read in key split `split` of the block.
__device__ __forceinline__ int split_end(const Args& a, const Work& w, int split) {
  return int(min(int64_t(w.kv_hi), int64_t(split_origin(a, w)) + (int64_t(split) + 1) * a.chunk));
}

// Query token t (< w.nt) of the block: its position and its row in q / out.
__device__ __forceinline__ void block_token(const Args& a, const Work& w, int t, int& pos, int& row) {
  if (!a.prefix_pass) {
    pos = w.pos_a + t;
    row = a.row0[w.seq] + w.qa + t;
    return;
  }
  int c = w.qa + t, s = w.seq;
  while (c >= a.n_q[s]) c -= a.n_q[s++];
  pos = a.pos0[s] + c;
  row = a.row0[s] + c;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// In place on rows [0, nrows) of x (row stride ld floats, HD values), per group of n: rotate = S then
// H (signs first), unrotate = H then S; H is the CPU's butterflies and scale (bit-identical to
// turbo::rotate / unrotate: stage h = 1, 2, .., n/2 pairs (j, j + h) into a + b and a - b, then the
// scale, one rounded multiply per value). Every thread of the block must call it; it ends with a
// barrier (the caller has one before it).
// One warp per row (rows w, w + 4, ..), lane l holding values l * V .. l * V + V - 1 (V = HD / 32) in
// registers: stages h < V pair values of one lane, stages h >= V pair lane l with lane l ^ (h / V)
// through a shuffle (the lane whose values have bit h set holds the "j + h" side). One barrier
// instead of one per stage (2026-12-01c: nine per call at n = 128).
// NTH: the block's threads (kThreads, or kPrefix256Threads for the 256-row prefix kernel).
template <int HD, int NTH = kThreads>
__device__ void fwht_rows(float* x, int ld, int nrows, bool rotate) {
  constexpr int n = turbo_group_of(HD), slot = group_slot(n), V = HD / 32;
  static_assert(V >= 1 && HD % 32 == 0 && n % V == 0);
  const float* sign = g_tables.signs[slot];
  const float scale = g_tables.fwht_scale[slot];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, e0 = lane * V;
  for (int r = warp; r < nrows; r += NTH / 32) {  // warp-uniform: the shuffles see the whole warp
    float* row = x + r * ld;
    float v[V];
#pragma unroll
    for (int k = 0; k < V; ++k) {
      v[k] = row[e0 + k];
      if (rotate) v[k] *= sign[(e0 + k) % n];
    }
#pragma unroll
    for (int h = 1; h < V && h < n; h *= 2)
#pragma unroll
      for (int k = 0; k < V; ++k)
        if ((k & h) == 0) {
          const float a = v[k], b = v[k + h];
          v[k] = a + b;
          v[k + h] = a - b;
        }
#pragma unroll
    for (int h = V; h < n; h *= 2) {
      const bool upper = (e0 & h) != 0;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const float o = __shfl_xor_sync(0xffffffffu, v[k], h / V);
        v[k] = upper ? o - v[k] : v[k] + o;  // upper: a - b with a = the partner's; lower: a + b
      }
    }
#pragma unroll
    for (int k = 0; k < V; ++k) {
      float y = v[k] * scale;
      if (!rotate) y *= sign[(e0 + k) % n];
      row[e0 + k] = y;
    }
  }
  __syncthreads();
}

// dst[t][0..HD) (row stride HD + 4) <- the rows at rows[t] decoded to f32 in their stored basis, for
// t < nk; zeros for nk <= t < kTileKeys. Consecutive threads take consecutive 8-value pieces of a
// row (coalesced reads: a pool block's rows of one head are contiguous).
template <KvType T, int HD>
__device__ __forceinline__ void decode_tile(const uint64_t* rows, int nk, const float* lv, uint32_t subset_word,
                                         float* dst) {
  constexpr int P = HD / 8;
  for (int i = threadIdx.x; i < kTileKeys * P; i += kThreads) {
    const int t = i / P, c = i - t * P;
    float v[8];
    if (t < nk) {
      decode8<T>(reinterpret_cast<const uint8_t*>(rows[t]), c, HD, lv, subset_word, v);
    } else {
      for (int k = 0; k < 8; ++k) v[k] = 0.0f;
    }
    float4* o = reinterpret_cast<float4*>(dst + t * (HD + 4) + 8 * c);
    o[0] = make_float4(v[0], v[1], v[2], v[3]);
    o[1] = make_float4(v[4], v[5], v[6], v[7]);
  }
}

template <int HD>
__device__ void decode_tile_any(KvType type, const uint64_t* rows, int nk, const float* lv, uint32_t subset_word,
                                float* dst) {
  switch (type) {
    case KvType::F32: decode_tile<KvType::F32, HD>(rows, nk, lv, subset_word, dst); break;
    case KvType::F16: decode_tile<KvType::F16, HD>(rows, nk, lv, subset_word, dst); break;
    case KvType::BF16: decode_tile<KvType::BF16, HD>(rows, nk, lv, subset_word, dst); break;
    case KvType::Q8_0: decode_tile<KvType::Q8_0, HD>(rows, nk, lv, subset_word, dst); break;
    case KvType::Q4_0: decode_tile<KvType::Q4_0, HD>(rows, nk, lv, subset_word, dst); break;
    case KvType::Turbo4: decode_tile<KvType::Turbo4, HD>(rows, nk, lv, subset_word, dst); break;
    case KvType::Turbo3: decode_tile<KvType::Turbo3, HD>(rows, nk, lv, subset_word, dst); break;
    case KvType::Turbo2: decode_tile<KvType::Turbo2, HD>(rows, nk, lv, subset_word, dst); break;
    case KvType::Turbo4T: decode_tile<KvType::Turbo4T, HD>(rows, nk, lv, subset_word, dst); break;
    case KvType::Turbo3T: decode_tile<KvType::Turbo3T, HD>(rows, nk, lv, subset_word, dst); break;
    case KvType::Turbo2T: decode_tile<KvType::Turbo2T, HD>(rows, nk, lv, subset_word, dst); break;
  }
}

// Block prologue shared by the kernels, for `rows` rows (rows <= kThreads): the K and V level tables
// into lvk / lvv; each row's visible keys (qhi: its position = last key it sees, -1 for no row; qlo:
// first key) and its row in q / out (qrow, -1 for no row); the rows' queries scaled by a.scale
// (zeros for no row) into Qs [rows][ld], rotated into K's basis for turbo K. Ends with a barrier.
template <int HD>
__device__ void block_prologue(const Args& a, const Work& w, int rows, float* Qs, int ld, int* qhi, int* qlo,
                               int* qrow, float* lvk, float* lvv) {
  const int tid = threadIdx.x;
  if (tid < 32) {
    const float* k = kv_levels(g_tables, a.k_type, HD);
    const float* v = kv_levels(g_tables, a.v_type, HD);
    lvk[tid] = tid < kv_n_levels(a.k_type) ? k[tid] : 0.0f;
    lvv[tid] = tid < kv_n_levels(a.v_type) ? v[tid] : 0.0f;
  }
  if (tid < rows) {
    const int t = tid / a.gj, jj = tid - t * a.gj;
    int pos = -1, row = -1;
    if (t < w.nt && jj < w.nj) block_token(a, w, t, pos, row);
    qhi[tid] = pos;
    qlo[tid] = pos < 0 ? 0x7fffffff : a.window > 0 ? max(0, pos - a.window + 1) : 0;
    qrow[tid] = row;
  }
  __syncthreads();
  const int h0 = w.g * a.group + w.j0;
  for (int i = tid; i < rows * (HD / 4); i += kThreads) {
    const int r = i / (HD / 4), d4 = i - r * (HD / 4);
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (qrow[r] >= 0) {
      // Through L2 only (ld.global.cg): with the lanes8 kernel's early start (Args::early) q is read
      // before this grid's griddepcontrol.wait; the kernel that wrote it completed before the kv_store
      // between them let this grid launch, and L2 is where its writes are visible to every SM.
      const float4* qp = reinterpret_cast<const float4*>(a.q + (size_t(qrow[r]) * a.n_head + h0 + r % a.gj) * HD) + d4;
#if !defined(POLYKV_ATTN_EMULATION) && defined(__CUDA_ARCH__)
      v = __ldcg(qp);
#else
      v = *qp;
#endif
      v.x *= a.scale, v.y *= a.scale, v.z *= a.scale, v.w *= a.scale;
    }
    reinterpret_cast<float4*>(Qs + r * ld)[d4] = v;
  }
  __syncthreads();
  if (kv_rotated(a.k_type)) fwht_rows<HD>(Qs, ld, rows, true);
}

// Block epilogue without partials: O [rows][ld] holds the normalized outputs in V's basis; rotates
// them back for turbo V and writes the rows that exist. Every thread must call it.
template <int HD>
__device__ void write_outputs(const Args& a, const Work& w, int rows, float* O, int ld, const int* qrow) {
  if (kv_rotated(a.v_type)) fwht_rows<HD>(O, ld, rows, false);
  const int h0 = w.g * a.group + w.j0;
  for (int i = threadIdx.x; i < rows * (HD / 4); i += kThreads) {
    const int r = i / (HD / 4), d4 = i - r * (HD / 4);
    if (qrow[r] < 0) continue;
    reinterpret_cast<float4*>(a.out + (size_t(qrow[r]) * a.n_head + h0 + r % a.gj) * HD)[d4] =
        reinterpret_cast<const float4*>(O + r * ld)[d4];
  }
}

// The factor that turns a row's accumulator into its output: 1 / (l + exp(sink - m)) with the sink of
// query head h when the call has sinks (a.sinks, gpt-oss), else 1 / l. m: the max of the row's scores
// over ALL its visible keys, l: the sum of exp(score - m) over them (every split and the prefix pass
// already folded), so the sink joins the denominator exactly once per row: wherever the row is
// finalized (merge_kernel, or a block that writes its outputs itself: one split, no shared prefix),
// never in a partial. Computed against max(m, sink) so that nothing overflows (the CPU's formula,
// attn::write_rows); a row with no visible key (m = -inf, l = 0) gets 0.
__device__ __forceinline__ float row_norm(const Args& a, int h, float m, float l) {
  if (!a.sinks) return 1.0f / l;
  const float s = a.sinks[h], M = fmaxf(m, s), e = expf(m - M);
  return e / (l * e + expf(s - M));
}

// The decode kernels' end (no partials): the output value of row r from its slot states st_ml
// [ns][kDecodeRows][2] (m, l) folded against their max into o and L: o / L, or with sinks
// o * row_norm against that max. Batch-invariant plans: o * (1 / L), merge_kernel's o * row_norm(M, L)
// for a row with one split (its weight exp(0) = 1, its sums 0 + o and 0 + L exact), so a row gets the
// same bits whether its step's bound gives it one split or more (the others empty for it).
__device__ __forceinline__ float decode_output(const Args& a, const Work& w, int r, float o, float L,
                                               const float* st_ml, int ns) {
  if (!a.sinks) return a.invariant ? o * (1.0f / L) : o / L;
  float M = -INFINITY;
  for (int s = 0; s < ns; ++s) M = fmaxf(M, st_ml[(s * kDecodeRows + r) * 2]);
  return o * row_norm(a, w.g * a.group + w.j0 + r % a.gj, M, L);
}

// Index of this block's partial among the grid's blocks (the merge reads split s of (y, z) at
// (z * gridDim.y + y) * n_splits + s).
__device__ __forceinline__ size_t partial_index() {
  return (size_t(blockIdx.z) * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
}

// Shared memory of attention_kernel<HD, RMAX>, in bytes (the launcher sizes the launch with it).
constexpr size_t smem_bytes(int hd, int rmax) {
  const size_t ld = size_t(hd) + 4;
  return 2 * kTileKeys * sizeof(uint64_t) +
         (size_t(rmax) * ld + kTileKeys * ld + size_t(kTileKeys) * rmax + 6 * size_t(rmax) + 64) * sizeof(float);
}

template <int HD, int RMAX>
__global__ void __launch_bounds__(kThreads, 2) attention_kernel(const Args a) {
  constexpr int T = kTileKeys, LD = HD + 4;
  constexpr int RM = RMAX / 16;      // scores: 16 row groups x 8 key groups of 4 keys; rows per thread
  constexpr int DG = HD / 8;         // accumulation: dim groups of 8 values
  constexpr int RG = kThreads / DG;  // accumulation: row groups
  constexpr int RM2 = RMAX / RG;     // accumulation: rows per thread
  static_assert(RM >= 1 && RMAX % 16 == 0 && RG * DG == kThreads && RM2 >= 1 && RMAX % RG == 0);

  pdl_enter();
  Work w;
  if (!block_work(a, blockIdx.y, blockIdx.z, w)) return;
  const int kb = max(w.kv_lo, int(blockIdx.x) * a.chunk);
  const int ke = int(min(int64_t(w.kv_hi), (int64_t(blockIdx.x) + 1) * a.chunk));
  if (kb >= ke) return;  // this split holds no key of the block (the merge skips it too)

  POLYKV_DYNAMIC_SHARED(smem4);
  uint64_t* kp = reinterpret_cast<uint64_t*>(smem4);  // [T] K row addresses of the tile
  uint64_t* vp = kp + T;                              // [T] V row addresses
  float* Qs = reinterpret_cast<float*>(vp + T);       // [RMAX][LD] queries (scaled, K's basis); output at the end
  float* KV = Qs + RMAX * LD;                         // [T][LD] the decoded K tile, then the V tile
  float* Ps = KV + T * LD;                            // [T][RMAX] scores, then probabilities
  float* m_s = Ps + T * RMAX;                         // [RMAX] running max
  float* l_s = m_s + RMAX;                            // [RMAX] running sum
  float* a_s = l_s + RMAX;                            // [RMAX] this tile's rescale of acc
  int* qhi = reinterpret_cast<int*>(a_s + RMAX);      // [RMAX] row's position (last key it sees); -1: no row
  int* qlo = qhi + RMAX;                              // [RMAX] first key the row sees
  int* qrow = qlo + RMAX;                             // [RMAX] row in q / out; -1: no row
  float* lvk = reinterpret_cast<float*>(qrow + RMAX); // [32] K's levels (turbo)
  float* lvv = lvk + 32;                              // [32] V's levels

  const int tid = threadIdx.x;
  const uint32_t subset_word = g_tables.subset_word;
  if (tid < RMAX) {
    m_s[tid] = -INFINITY;
    l_s[tid] = 0.0f;
  }
  block_prologue<HD>(a, w, RMAX, Qs, LD, qhi, qlo, qrow, lvk, lvv);

  float acc[RM2][8];
  for (int i = 0; i < RM2; ++i)
    for (int k = 0; k < 8; ++k) acc[i][k] = 0.0f;
  const int ar = tid / DG, ad = tid - ar * DG;  // accumulation: rows ar*RM2.., values ad*8..
  const int tr = tid / 8, tk = tid - tr * 8;    // scores: rows tr*RM.., keys tk*4..
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
    __syncthreads();
    decode_tile_any<HD>(a.k_type, kp, nk, lvk, subset_word, KV);
    __syncthreads();

    // Scores of rows tr*RM .. +RM-1 against keys tk*4 .. +3.
    {
      float sc[RM][4];
      for (int i = 0; i < RM; ++i)
        for (int j = 0; j < 4; ++j) sc[i][j] = 0.0f;
#pragma unroll 4
      for (int d = 0; d < HD; d += 4) {
        float4 kv[4];
        for (int j = 0; j < 4; ++j) kv[j] = *reinterpret_cast<const float4*>(KV + (tk * 4 + j) * LD + d);
        for (int i = 0; i < RM; ++i) {
          const float4 qv = *reinterpret_cast<const float4*>(Qs + (tr * RM + i) * LD + d);
          for (int j = 0; j < 4; ++j)
            sc[i][j] += qv.x * kv[j].x + qv.y * kv[j].y + qv.z * kv[j].z + qv.w * kv[j].w;
        }
      }
      for (int i = 0; i < RM; ++i)
        for (int j = 0; j < 4; ++j) {
          const int r = tr * RM + i, t = tk * 4 + j, pos = t0 + t;
          float s = sc[i][j];
          if (a.softcap > 0.0f) s = a.softcap * tanhf(s / a.softcap);
          const bool visible = t < nk && pos <= qhi[r] && pos >= qlo[r];
          Ps[t * RMAX + r] = visible ? s : -INFINITY;
        }
    }
    __syncthreads();

    // V tile (K is no longer needed) and the tile's online softmax, one warp per row, one lane per key.
    decode_tile_any<HD>(a.v_type, vp, nk, lvv, subset_word, KV);
    {
      const int warp = tid / 32, lane = tid % 32;
      for (int r = warp; r < RMAX; r += kThreads / 32) {
        if (qhi[r] < 0) {  // no row: weight 0, so its acc stays finite (it is never written)
          Ps[lane * RMAX + r] = 0.0f;
          if (lane == 0) a_s[r] = 1.0f;
          continue;
        }
        const float s = Ps[lane * RMAX + r];
        const float m_old = m_s[r], m_new = fmaxf(m_old, warp_max(s));
        // All keys so far masked: m stays -inf, weights 0 (no exp(-inf - -inf)).
        const float p = m_new == -INFINITY ? 0.0f : expf(s - m_new);
        const float alpha = m_old == -INFINITY ? 0.0f : expf(m_old - m_new);
        const float sum = warp_sum(p);
        Ps[lane * RMAX + r] = p;
        __syncwarp();  // every lane has read m_s[r] / l_s[r] before lane 0 overwrites them
        if (lane == 0) {
          m_s[r] = m_new;
          l_s[r] = l_s[r] * alpha + sum;
          a_s[r] = alpha;
        }
      }
    }
    __syncthreads();

    // acc[rows ar*RM2..][values ad*8..] = alpha * acc + sum_t p[t] * V[t].
    {
      for (int i = 0; i < RM2; ++i) {
        const float al = a_s[ar * RM2 + i];
        for (int k = 0; k < 8; ++k) acc[i][k] *= al;
      }
      for (int t = 0; t < nk; ++t) {
        const float4 v0 = *reinterpret_cast<const float4*>(KV + t * LD + ad * 8);
        const float4 v1 = *reinterpret_cast<const float4*>(KV + t * LD + ad * 8 + 4);
        const float v[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
        float p[RM2];
        if constexpr (RM2 % 4 == 0) {
          for (int i = 0; i < RM2; i += 4) {
            const float4 p4 = *reinterpret_cast<const float4*>(Ps + t * RMAX + ar * RM2 + i);
            p[i] = p4.x, p[i + 1] = p4.y, p[i + 2] = p4.z, p[i + 3] = p4.w;
          }
        } else {
          for (int i = 0; i < RM2; ++i) p[i] = Ps[t * RMAX + ar * RM2 + i];
        }
        for (int i = 0; i < RM2; ++i)
          for (int k = 0; k < 8; ++k) acc[i][k] += p[i] * v[k];
      }
    }
    __syncthreads();
  }

  if (!a.partial) {
    // Normalize into Qs (free now), rotate back for turbo V, write the block's rows.
    const int h0 = w.g * a.group + w.j0;
    for (int i = 0; i < RM2; ++i) {
      const int r = ar * RM2 + i;
      const float inv = qhi[r] >= 0 ? row_norm(a, h0 + r % a.gj, m_s[r], l_s[r]) : 0.0f;
      float4* o = reinterpret_cast<float4*>(Qs + r * LD + ad * 8);
      o[0] = make_float4(acc[i][0] * inv, acc[i][1] * inv, acc[i][2] * inv, acc[i][3] * inv);
      o[1] = make_float4(acc[i][4] * inv, acc[i][5] * inv, acc[i][6] * inv, acc[i][7] * inv);
    }
    __syncthreads();
    write_outputs<HD>(a, w, RMAX, Qs, LD, qrow);
    return;
  }
  const size_t blk = partial_index();
  float* po = a.part_o + blk * RMAX * HD;
  for (int i = 0; i < RM2; ++i) {
    const int r = ar * RM2 + i;
    if (qhi[r] < 0) continue;
    float4* o = reinterpret_cast<float4*>(po + r * HD + ad * 8);
    o[0] = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
    o[1] = make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]);
  }
  if (tid < RMAX && qhi[tid] >= 0) {
    a.part_ml[(blk * RMAX + tid) * 2] = m_s[tid];
    a.part_ml[(blk * RMAX + tid) * 2 + 1] = l_s[tid];
  }
}

// Folds the partials of row blockIdx.x of work item (blockIdx.y, blockIdx.z) of the per-sequence
// launch a (rmax rows per block) by log-sum-exp: its key splits, and with a shared prefix the splits
// of its row in the prefix pass ap (rmax_p rows per block; ignored without prefixes). Normalizes,
// rotates back for turbo V and writes the output row.
template <int HD, bool kGrouped = true>
__global__ void __launch_bounds__(kThreads) merge_kernel(const Args a, int rmax, const Args ap, int rmax_p) {
  __shared__ float o[HD];
  __shared__ float wts[2 * kMaxSplits];
  // Which row and splits, before the wait: block_work, the prefix tables and block_token read only the step's
  // tables (uploaded before the step's first kernel; no kernel writes them), as the early-started decode
  // kernels do (decode_block_begin), so their round trips to L2 run under the decode kernel's end.
  Work w;
  const int r = blockIdx.x;
  int t = 0, jj = 0;
  bool live = block_work(a, blockIdx.y, blockIdx.z, w);
  if (live) {
    t = r / a.gj;
    jj = r - t * a.gj;
    live = t < w.nt && jj < w.nj;
  }
  // The row's own splits: those whose main-kernel block did not exit early, the ones meeting
  // [kv_lo, kv_hi). (Clamped to the grid: keys past the host bound max_kv, a caller's error, are
  // never read.)
  int s_lo = 0, n_own = 0;
  if (live && w.kv_lo < w.kv_hi) {
    const int origin = split_origin(a, w);
    s_lo = (w.kv_lo - origin) / a.chunk;
    n_own = min((w.kv_hi - 1 - origin) / a.chunk, a.n_splits - 1) - s_lo + 1;
  }
  const size_t own0 = (size_t(blockIdx.z) * gridDim.y + blockIdx.y) * a.n_splits + s_lo;
  // Its prefix-pass row: query c of the group, head j; splits 0 .. n_pre - 1 meet [0, prefix).
  int n_pre = 0, pr = 0;
  size_t pre0 = 0;
  if (live && a.n_prefix > 0) {
    int grp;
    const int prefix = prefix_of(a, w.seq, grp);
    if (grp >= 0 && prefix > 0) {
      int c = w.qa + t;
      for (int s = a.prefix_seq0[grp]; s < w.seq; ++s) c += a.n_q[s];
      const int j = w.j0 + jj, hp = j / ap.gj, tile = c / ap.qt;
      pr = (c - tile * ap.qt) * ap.gj + (j - hp * ap.gj);
      const size_t yp = size_t(w.g) * ap.hparts + hp, zp = size_t(grp) * ap.qtiles + tile;
      const size_t grid_yp = size_t(a.n_head / a.group) * ap.hparts;
      pre0 = (zp * grid_yp + yp) * ap.n_splits;
      n_pre = min((prefix - 1) / ap.chunk, ap.n_splits - 1) + 1;
    }
  }
  int pos = 0, row = 0;
  if (live) block_token(a, w, t, pos, row);
  (void)pos;
  // Every thread waits before it exits (the grid never completes before the decode kernel's).
  pdl_enter();
  if (!live) return;
  const auto m_of = [&](int e) {
    return e < n_own ? a.part_ml[((own0 + e) * rmax + r) * 2] : ap.part_ml[((pre0 + e - n_own) * rmax_p + pr) * 2];
  };
  const auto l_of = [&](int e) {
    return e < n_own ? a.part_ml[((own0 + e) * rmax + r) * 2 + 1]
                     : ap.part_ml[((pre0 + e - n_own) * rmax_p + pr) * 2 + 1];
  };
  // Values 4 c .. 4 c + 3 of split e's O (rows are HD floats, HD % 4 == 0: 16-byte aligned).
  const auto o4_of = [&](int e, int c) {
    return e < n_own ? reinterpret_cast<const float4*>(a.part_o + ((own0 + e) * rmax + r) * HD)[c]
                     : reinterpret_cast<const float4*>(ap.part_o + ((pre0 + e - n_own) * rmax_p + pr) * HD)[c];
  };
  const int n = n_own + n_pre;
  float M = -INFINITY, L = 0.0f;
  // Every split's (m, l) by its own thread; then the max and the sums in split order from shared
  // memory; O with the loads unrolled (a split of weight 0 adds 0: its O is finite, written by a block
  // that ran, or 0 for rows it did not see). Since 2026-12-01e; the serial loops before it (one thread
  // reading every split's m, l in turn) made the same sums in the same order.
  __shared__ float ms[2 * kMaxSplits], ls[2 * kMaxSplits];
  for (int e = threadIdx.x; e < n; e += kThreads) ms[e] = m_of(e), ls[e] = l_of(e);
  __syncthreads();
  for (int e = 0; e < n; ++e) M = fmaxf(M, ms[e]);
  for (int e = threadIdx.x; e < n; e += kThreads) wts[e] = ms[e] == -INFINITY ? 0.0f : expf(ms[e] - M);
  __syncthreads();
  for (int e = 0; e < n; ++e) L += wts[e] * ls[e];
  const int h = w.g * a.group + w.j0 + jj;
  const float inv = row_norm(a, h, M, L);  // the sink, if any: once, here (partials never hold it)
  // O: thread (g, c) sums float4 column c over splits g, g + G, g + 2 G, ... in that order, its loads
  // independent of each other, so a thread's splits cost about one round trip to L2. (Until 2026-12-02
  // one thread per value walked all n splits, eight loads at a time: at 64 splits the merge ended ~18 us
  // after the decode kernel, in the decode graph at 32768 keys; call L1, docs/CUDA_ATTENTION.md.) Then
  // o = the G groups' sums added in group order, times inv. A split of weight 0 adds 0, so a row with
  // one split of weight 1 gets o exactly (0 + o + 0 ...), as the batch-invariant plans need.
  constexpr int C = HD / 4, G = kThreads >= C ? kThreads / C : 1;
  static_assert(HD % 4 == 0 && (kThreads % C == 0 || C % kThreads == 0), "whole float4 columns per thread");
  __shared__ __align__(16) float red[G * HD];  // [group][value]
  if constexpr (!kGrouped) {  // POLYKV_CUDA_MERGE=serial: the loop before (attn::merge_grouped)
    for (int d = threadIdx.x; d < HD; d += kThreads) {
      float sum = 0.0f;
#pragma unroll 8
      for (int e = 0; e < n; ++e) {
        const float ov = e < n_own ? a.part_o[((own0 + e) * rmax + r) * HD + d]
                                   : ap.part_o[((pre0 + e - n_own) * rmax_p + pr) * HD + d];
        const float x = wts[e] * ov;
        sum += wts[e] != 0.0f ? x : 0.0f;
      }
      o[d] = sum * inv;
    }
  }
  for (int i = threadIdx.x; kGrouped && i < G * C; i += kThreads) {
    const int g = i / C, c = i - g * C;
    float4 s4 = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll 8
    for (int e = g; e < n; e += G) {
      const float we = wts[e];
      const float4 x = o4_of(e, c);
      if (we != 0.0f) {
        s4.x += we * x.x;
        s4.y += we * x.y;
        s4.z += we * x.z;
        s4.w += we * x.w;
      }
    }
    reinterpret_cast<float4*>(red + g * HD)[c] = s4;
  }
  __syncthreads();
  for (int d = threadIdx.x; kGrouped && d < HD; d += kThreads) {
    float sum = red[d];
    for (int g = 1; g < G; ++g) sum += red[g * HD + d];
    o[d] = sum * inv;
  }
  __syncthreads();
  if (kv_rotated(a.v_type)) fwht_rows<HD>(o, HD, 1, false);
  for (int d = threadIdx.x; d < HD; d += kThreads) a.out[(size_t(row) * a.n_head + h) * HD + d] = o[d];
}

}  // namespace POLYKV_ATTN_NS
}  // namespace polykv::cuda::attn
