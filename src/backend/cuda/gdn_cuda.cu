// Kernels of backend/cuda/gdn_cuda.h. The per-element arithmetic is gdn_cuda_math.cuh (host-tested);
// this file maps threads onto it.
//
// Delta rule: one block per (sequence, value head); column j of the head's d x d state (S[i][j], i < d)
// belongs to SPLIT adjacent threads, each holding d / SPLIT rows in registers (d = 32: 1, 64: 2,
// 128: 4 threads per column), or, for other d, to one thread in the next slot in global memory. Per
// token: the block l2-normalises q and k of the head's key head (two block sums in a fixed order),
// then the threads advance their column pieces (decay_dot, update_dot) and write o_j.
// Token-sequential; steps of more than kMaxLoggedRows rows (prompt chunks) take the chunked form instead
// (gdn_chunked_cuda.cu) unless POLYKV_CUDA_GDN=tokens.
// Results depend only on the sequence's own rows: batching never changes them.
#include "backend/cuda/gdn_cuda.h"

#include <algorithm>
#include <cstdlib>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gdn_cuda_math.cuh"
#include "core/error.h"

namespace polykv::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kConvThreads = 128;
constexpr int kLogged = RecurrentState::kMaxLoggedRows;

// ---- gated attention ----------------------------------------------------------------------------
__global__ void deinterleave_kernel(const float* src, int64_t n_groups, int a, int b, float* dst_a, float* dst_b) {
  const int w = a + b;
  const int64_t total = n_groups * w;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t g = i / w;
    const int c = int(i - g * w);
    const float v = src[i];
    if (c < a)
      dst_a[g * a + c] = v;
    else
      dst_b[g * b + (c - a)] = v;
  }
}

__global__ void sigmoid_mul_kernel(float* x, const float* gate, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    x[i] *= gdn::sigmoid(gate[i]);
}

int blocks_for(int64_t n) { return int(std::min<int64_t>((n + kThreads - 1) / kThreads, int64_t(1) << 16)); }

// ---- short convolution ----------------------------------------------------------------------------
// Thread = channel c of sequence blockIdx.y for the kConvRows rows starting at kConvRows * blockIdx.z; the
// window [K-1 previous inputs ; current] in registers. Each output reads its K inputs (from the step or the
// conv state), so row blocks need not wait for each other; the block holding the sequence's last row (block
// 0 for a sequence of no rows: the state copied as is) writes the next conv state and every row logs its input.
constexpr int kConvRows = 16;
__global__ void ssm_conv_rows_kernel(const GdnSeqDevice* seqs, GdnShapeDevice sh, int layer, const float* w,
                                     const float* x, float* out) {
  const int C = sh.channels, K = sh.kernel, km1 = K - 1;
  const int c = int(blockIdx.x) * blockDim.x + int(threadIdx.x);
  const GdnSeqDevice s = seqs[blockIdx.y];
  const int t0 = int(blockIdx.z) * kConvRows;
  if (c >= C || (t0 >= s.n && t0 > 0)) return;
  const float* st = s.cur + int64_t(layer) * sh.layer_floats;  // [K-1][C]
  // Input at position p of the step (p < 0: the conv state's row K-1+p).
  const auto input = [&](int p) { return p < 0 ? st[int64_t(km1 + p) * C + c] : x[int64_t(s.row0 + p) * C + c]; };
  float* lg = s.log ? s.log + int64_t(layer) * sh.log_layer_floats : nullptr;
  float win[gdn::kMaxConvKernel], wc[gdn::kMaxConvKernel];
  for (int j = 0; j < K; ++j) wc[j] = w[int64_t(c) * K + j];
  for (int j = 0; j < km1; ++j) win[j] = input(t0 - km1 + j);
  const int t1 = min(s.n, t0 + kConvRows);
  for (int t = t0; t < t1; ++t) {
    const float xv = input(t);
    win[km1] = xv;
    out[int64_t(s.row0 + t) * C + c] = gdn::conv_silu(wc, win, K);
    if (lg) lg[int64_t(t) * sh.log_row_floats + c] = xv;
    for (int j = 0; j < km1; ++j) win[j] = win[j + 1];
  }
  if (t1 == s.n) {  // the next conv state: the last K-1 inputs
    float* nx = s.next + int64_t(layer) * sh.layer_floats;
    for (int j = 0; j < km1; ++j) nx[int64_t(j) * C + c] = input(s.n - km1 + j);
  }
}

// Replay: to's conv state = the last K-1 of [from's ; n_rows logged inputs]. Grid (channels, layers).
__global__ void conv_replay_kernel(GdnShapeDevice sh, const float* from, float* to, const float* log, int n_rows) {
  const int C = sh.channels, km1 = sh.kernel - 1;
  const int c = int(blockIdx.x) * blockDim.x + int(threadIdx.x);
  if (c >= C) return;
  const int layer = int(blockIdx.y);
  const float* st = from + int64_t(layer) * sh.layer_floats;
  float* nx = to + int64_t(layer) * sh.layer_floats;
  const float* lg = log + int64_t(layer) * sh.log_layer_floats;
  for (int j = 0; j < km1; ++j) {
    const int src = n_rows + j;  // index in [from's K-1 ; logged rows]
    nx[int64_t(j) * C + c] = src < km1 ? st[int64_t(src) * C + c] : lg[int64_t(src - km1) * sh.log_row_floats + c];
  }
}

// ---- delta rule -------------------------------------------------------------------------------------
// Sums of a and b over the block (blockDim.x a multiple of 32, <= 1024), the same bits in every thread.
// red: [64] shared. Ends with the block synchronized after red was written; red may be rewritten only
// after a further __syncthreads.
__device__ __forceinline__ void block_sum2(float& a, float& b, float* red) {
  for (int o = 16; o > 0; o >>= 1) {
    a += __shfl_xor_sync(0xffffffffu, a, o);
    b += __shfl_xor_sync(0xffffffffu, b, o);
  }
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32, nw = int(blockDim.x) / 32;
  if (lane == 0) {
    red[warp] = a;
    red[32 + warp] = b;
  }
  __syncthreads();
  a = 0.0f;
  b = 0.0f;
  for (int w = 0; w < nw; ++w) {
    a += red[w];
    b += red[32 + w];
  }
}

// Sequences of more than A.max_rows rows are the chunked kernel's (gdn_chunked_cuda.cu): skipped here.
using RuleArgs = GdnRuleArgs;

// The piece of column j a thread owns: rows [i0, i0 + R) in registers (R > 0), or the whole column in
// the next slot in global memory (R == 0, d at run time).
template <int R>
struct Column {
  float r[R];
  __device__ __forceinline__ float& operator[](int i) { return r[i]; }
  __device__ __forceinline__ void load(const float* S0, float*, int j, int d, int i0) {
#pragma unroll
    for (int i = 0; i < R; ++i) r[i] = S0[int64_t(i0 + i) * d + j];
  }
  __device__ __forceinline__ void store(float* S1, int j, int d, int i0) const {
#pragma unroll
    for (int i = 0; i < R; ++i) S1[int64_t(i0 + i) * d + j] = r[i];
  }
};
template <>
struct Column<0> {
  gdn::StridedColumn c{nullptr, 0};
  __device__ __forceinline__ float& operator[](int i) { return c[i]; }
  __device__ __forceinline__ void load(const float* S0, float* S1, int j, int d, int) {
    c = {S1 + j, d};
    for (int i = 0; i < d; ++i) c[i] = S0[int64_t(i) * d + j];
  }
  __device__ __forceinline__ void store(float*, int, int, int) const {}
};

// Sum of a value over the SPLIT adjacent lanes that own one column (butterfly: every lane of the group
// gets the same bits, IEEE addition being commutative).
template <int SPLIT>
__device__ __forceinline__ float piece_sum(float x) {
#pragma unroll
  for (int o = 1; o < SPLIT; o <<= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// How a head's d x d state maps onto a block: D (0: run-time d), SPLIT threads per column, each owning
// D / SPLIT rows (registers: no spills at d = 128 with 4 pieces of 32).
template <int D, int SPLIT>
struct Layout {
  static_assert(D == 0 ? SPLIT == 1 : (D % SPLIT == 0 && (SPLIT & (SPLIT - 1)) == 0 && SPLIT <= 32), "bad split");
  static constexpr int R = D > 0 ? D / SPLIT : 0;
  int d, j, h, r, i0;
  // col0: the first column of this block (a head's columns may be spread over several blocks).
  __device__ __forceinline__ Layout(int d_run, int col0 = 0) {
    d = D > 0 ? D : d_run;
    const int tid = int(threadIdx.x);
    j = col0 + tid / SPLIT;
    h = tid % SPLIT;
    r = D > 0 ? R : d;
    i0 = h * r;
  }
};

// Grid (n_v * G, n_seq): G blocks per value head, each owning D / G of its columns; blockDim.x = D / G * SPLIT
// (D == 0: d rounded up to 32, G = 1), at least d (every block loads all of q and k: their norms are summed
// in the same order whatever G, and every column's arithmetic is the same, so G does not change the bits;
// G > 1 spreads a token's 32 heads over more multiprocessors: the state's 64 KB a head is read and written
// at the bandwidth of G multiprocessors). Shared: q[d], k[d], red[64].
template <int D, int SPLIT, int G = 1>
__global__ void gdn_rule_kernel(const GdnSeqDevice* seqs, GdnShapeDevice sh, RuleArgs A) {
  static_assert(G == 1 || (D > 0 && D % G == 0 && D / G * SPLIT >= D), "bad column groups");
  extern __shared__ float smem[];
  using L = Layout<D, SPLIT>;
  const int cg = int(blockIdx.x) % G;
  const L lay(sh.d, cg * (D > 0 ? D / G : 0));
  const int d = lay.d, nk = sh.n_k, nv = sh.n_v, C = sh.channels;
  const int vh = int(blockIdx.x) / G, kh = vh % nk, e = int(threadIdx.x);
  const bool elem_ok = e < d;      // thread e loads element e of q, k, v
  const bool col_ok = lay.j < d;   // and owns a piece of column lay.j
  float* qs = smem;
  float* ks = smem + d;
  float* red = ks + d;
  const GdnSeqDevice s = seqs[blockIdx.y];
  if (s.n > A.max_rows) return;
  const int64_t head = sh.conv_floats + int64_t(vh) * d * d;
  const float* S0 = s.cur + int64_t(A.layer) * sh.layer_floats + head;
  float* S1 = s.next + int64_t(A.layer) * sh.layer_floats + head;
  float* lg = s.log ? s.log + int64_t(A.layer) * sh.log_layer_floats : nullptr;
  Column<L::R> col;
  if (col_ok) col.load(S0, S1, lay.j, d, lay.i0);
  for (int t = 0; t < s.n; ++t) {
    const int64_t row = s.row0 + t;
    const float* r = A.qkv + row * C;
    const float* vrow = r + 2 * nk * d + vh * d;
    const float qv = elem_ok ? r[kh * d + e] : 0.0f;
    const float kv = elem_ok ? r[(nk + kh) * d + e] : 0.0f;
    float sq = qv * qv, sk = kv * kv;
    block_sum2(sq, sk, red);
    const float kn = kv * gdn::l2_factor(sk, A.norm_eps, 1.0f);
    if (elem_ok) {
      qs[e] = qv * gdn::l2_factor(sq, A.norm_eps, A.q_scale);
      ks[e] = kn;
    }
    const float decay = expf(gdn::log_decay(A.alpha[row * nv + vh], A.dt_bias[vh], A.a[vh]));
    const float beta = gdn::sigmoid(A.beta_logit[row * nv + vh]);
    if (lg && cg == 0) {  // the step log (RecurrentShape::log_row_floats): conv input | k [n_k][d] | v [n_v][d] | decay | beta
      float* lr = lg + int64_t(t) * sh.log_row_floats + C;
      if (elem_ok && vh < nk) lr[vh * d + e] = kn;  // vh < nk: vh is its own key head
      if (elem_ok) lr[(nk + vh) * d + e] = vrow[e];
      if (e == 0) {
        lr[(nk + nv) * d + vh] = decay;
        lr[(nk + nv) * d + nv + vh] = beta;
      }
    }
    __syncthreads();
    if (col_ok) {
      const float tk = piece_sum<SPLIT>(gdn::decay_dot<L::R>(col, ks + lay.i0, decay, lay.r));
      const float u = gdn::delta_u(beta, vrow[lay.j], tk);
      const float o = piece_sum<SPLIT>(gdn::update_dot<L::R>(col, ks + lay.i0, qs + lay.i0, u, lay.r));
      if (lay.h == 0) A.out[(row * nv + vh) * d + lay.j] = o;
    }
    __syncthreads();  // qs, ks, red are rewritten by the next token
  }
  if (col_ok) col.store(S1, lay.j, d, lay.i0);
}

// Replay of logged rows: grid (n_v, n_layer), as gdn_rule_kernel without q (the same decay_dot,
// piece_sum, delta_u and update_dot on the same values: the same state bits).
template <int D, int SPLIT>
__global__ void gdn_replay_kernel(GdnShapeDevice sh, const float* from, float* to, const float* log, int n_rows) {
  extern __shared__ float smem[];
  using L = Layout<D, SPLIT>;
  const L lay(sh.d);
  const int d = lay.d, nk = sh.n_k, nv = sh.n_v, C = sh.channels;
  const int vh = int(blockIdx.x), kh = vh % nk, e = int(threadIdx.x), layer = int(blockIdx.y);
  const bool elem_ok = e < d, col_ok = lay.j < d;
  float* ks = smem;
  const int64_t head = int64_t(layer) * sh.layer_floats + sh.conv_floats + int64_t(vh) * d * d;
  const float* lg = log + int64_t(layer) * sh.log_layer_floats;
  Column<L::R> col;
  if (col_ok) col.load(from + head, to + head, lay.j, d, lay.i0);
  for (int t = 0; t < n_rows; ++t) {
    const float* lr = lg + int64_t(t) * sh.log_row_floats + C;
    if (elem_ok) ks[e] = lr[kh * d + e];
    const float decay = lr[(nk + nv) * d + vh], beta = lr[(nk + nv) * d + nv + vh];
    __syncthreads();
    if (col_ok) {
      const float tk = piece_sum<SPLIT>(gdn::decay_dot<L::R>(col, ks + lay.i0, decay, lay.r));
      const float u = gdn::delta_u(beta, lr[(nk + vh) * d + lay.j], tk);
      gdn::update_dot<L::R>(col, ks + lay.i0, static_cast<const float*>(nullptr), u, lay.r);
    }
    __syncthreads();
  }
  if (col_ok) col.store(to + head, lay.j, d, lay.i0);
}

// Threads per block of the delta-rule kernels for head size d (see the switches below).
int rule_threads(int d) {
  switch (d) {
    case 32: return 32;
    case 64: return 64 * 2;
    case 128: return 128 * 4;
    default: return (d + 31) / 32 * 32;
  }
}

}  // namespace

GdnShapeDevice gdn_shape(const RecurrentShape& s) {
  GdnShapeDevice g;
  g.n_k = s.n_k_heads;
  g.n_v = s.n_v_heads;
  g.d = s.head_dim;
  g.kernel = s.conv_kernel;
  g.channels = s.conv_channels();
  g.n_layer = s.n_layer;
  g.conv_floats = int64_t(s.conv_floats());
  g.layer_floats = int64_t(s.conv_floats() + s.ssm_floats());
  g.log_row_floats = int64_t(s.log_row_floats());
  g.log_layer_floats = int64_t(RecurrentState::kMaxLoggedRows) * g.log_row_floats;
  return g;
}

void deinterleave(const float* src, int rows, int groups, int a, int b, float* dst_a, float* dst_b, cudaStream_t s) {
  const int64_t n_groups = int64_t(rows) * groups;
  if (n_groups == 0) return;
  deinterleave_kernel<<<blocks_for(n_groups * (a + b)), kThreads, 0, s>>>(src, n_groups, a, b, dst_a, dst_b);
  POLYKV_CUDA_LAUNCHED();
}

void sigmoid_mul(float* x, const float* gate, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  sigmoid_mul_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, gate, n);
  POLYKV_CUDA_LAUNCHED();
}

void ssm_conv(const GdnSeqDevice* seqs, int n_seq, const GdnShapeDevice& sh, int layer, const float* w, const float* x,
              float* out, int max_rows, cudaStream_t s) {
  check(sh.kernel >= 1 && sh.kernel <= gdn::kMaxConvKernel, "CUDA ssm_conv: convolution kernel ", sh.kernel,
        " (at most ", gdn::kMaxConvKernel, ")");
  check(layer >= 0 && layer < sh.n_layer, "CUDA ssm_conv: state layer ", layer, " out of range");
  if (n_seq == 0) return;
  const unsigned cb = unsigned((sh.channels + kConvThreads - 1) / kConvThreads);
  const dim3 grid(cb, unsigned(n_seq), unsigned((std::max(max_rows, 1) + kConvRows - 1) / kConvRows));
  ssm_conv_rows_kernel<<<grid, kConvThreads, 0, s>>>(seqs, sh, layer, w, x, out);
  POLYKV_CUDA_LAUNCHED();
}

void gated_delta_rule(const GdnSeqDevice* seqs, int n_seq, const GdnShapeDevice& sh, int layer, const GdnParams& p,
                      const float* qkv, const float* alpha, const float* beta_logit, const float* dt_bias,
                      const float* a, float* out, int max_rows, bool chunked, cudaStream_t s) {
  check(p.n_k_heads == sh.n_k && p.n_v_heads == sh.n_v && p.head_dim == sh.d,
        "CUDA gated_delta_rule: parameters do not match the recurrent state's shape");
  check(sh.d >= 1 && sh.d <= 1024, "CUDA gated_delta_rule: head size ", sh.d, " (at most 1024)");
  check(layer >= 0 && layer < sh.n_layer, "CUDA gated_delta_rule: state layer ", layer, " out of range");
  if (n_seq == 0) return;
  // Sequences of more than kLogged rows (never logged: prompt chunks) take the chunked form when asked
  // and the head size has it; the token-sequential kernel then skips them (its blocks return at once).
  const bool chunk = chunked && max_rows > kLogged && gdn_chunked_supported(sh.d);
  RuleArgs A;
  A.layer = layer;
  A.q_scale = p.q_scale;
  A.norm_eps = p.norm_eps;
  A.qkv = qkv, A.alpha = alpha, A.beta_logit = beta_logit, A.dt_bias = dt_bias, A.a = a, A.out = out;
  if (chunk) {
    A.min_rows = kLogged;
    gated_delta_rule_chunked(seqs, n_seq, sh, A, s);
    A.min_rows = 0;
    A.max_rows = kLogged;
  }
  // The token-sequential kernel runs even when every sequence was chunked: which sequences are short is
  // data to a recorded step graph (its key holds the longest sequence's rows only).
  const dim3 grid(unsigned(sh.n_v), unsigned(n_seq));
  const int threads = rule_threads(sh.d);
  const size_t shared = (2 * size_t(sh.d) + 64) * sizeof(float);
  // d = 128: 4 blocks a head (32 columns x 4 pieces = 128 threads each); POLYKV_CUDA_GDN_GROUPS=1: one.
  static const int groups = [] {
    const char* v = std::getenv("POLYKV_CUDA_GDN_GROUPS");
    return v && *v == '1' ? 1 : 4;
  }();
  switch (sh.d) {
    case 32: gdn_rule_kernel<32, 1><<<grid, threads, shared, s>>>(seqs, sh, A); break;
    case 64: gdn_rule_kernel<64, 2><<<grid, threads, shared, s>>>(seqs, sh, A); break;
    case 128:
      if (groups == 4)
        gdn_rule_kernel<128, 4, 4><<<dim3(grid.x * 4, grid.y), threads / 4, shared, s>>>(seqs, sh, A);
      else
        gdn_rule_kernel<128, 4><<<grid, threads, shared, s>>>(seqs, sh, A);
      break;
    default: gdn_rule_kernel<0, 1><<<grid, threads, shared, s>>>(seqs, sh, A); break;
  }
  POLYKV_CUDA_LAUNCHED();
}

void gdn_replay(const GdnShapeDevice& sh, const float* from, float* to, const float* log, int n_rows, cudaStream_t s) {
  check(n_rows >= 0 && n_rows <= kLogged, "CUDA gdn_replay: ", n_rows, " rows (at most ", kLogged, " are logged)");
  if (sh.kernel > 1) {
    const dim3 grid(unsigned((sh.channels + kConvThreads - 1) / kConvThreads), unsigned(sh.n_layer));
    conv_replay_kernel<<<grid, kConvThreads, 0, s>>>(sh, from, to, log, n_rows);
    POLYKV_CUDA_LAUNCHED();
  }
  const dim3 grid(unsigned(sh.n_v), unsigned(sh.n_layer));
  const int threads = rule_threads(sh.d);
  const size_t shared = size_t(sh.d) * sizeof(float);
  switch (sh.d) {
    case 32: gdn_replay_kernel<32, 1><<<grid, threads, shared, s>>>(sh, from, to, log, n_rows); break;
    case 64: gdn_replay_kernel<64, 2><<<grid, threads, shared, s>>>(sh, from, to, log, n_rows); break;
    case 128: gdn_replay_kernel<128, 4><<<grid, threads, shared, s>>>(sh, from, to, log, n_rows); break;
    default: gdn_replay_kernel<0, 1><<<grid, threads, shared, s>>>(sh, from, to, log, n_rows); break;
  }
  POLYKV_CUDA_LAUNCHED();
}

}  // namespace polykv::cuda
