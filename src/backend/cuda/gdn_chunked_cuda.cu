// The chunked (WY / UT) form of the gated delta rule on the GPU (gdn_cuda.h: gated_delta_rule_chunked), for
// the sequences of a step with more than RecurrentState::kMaxLoggedRows rows (prompt chunks). The same
// algebra as the CPU's gdn_rule_chunked (backend/cpu/gated_delta_net.cpp, docs/HYBRID.md "Chunked
// prefill"): per chunk of up to 64 rows t with G_t the cumulative log decay inside the chunk and S0 the
// state at its start,
//   U = (I + A)^-1 X,  X_t = beta_t (v_t - e^{G_t} S0^T k_t),  A_ts = beta_t e^{G_t - G_s} k_t.k_s (s < t)
//   o_t = e^{G_t} S0^T q_t + sum_{s <= t} e^{G_t - G_s} (q_t.k_s) U_s
//   S   = e^{G_last} S0 + sum_s e^{G_last - G_s} k_s U_s^T
// Every exponent taken is G_t - G_s with s <= t (<= 0) or G_t itself (<= 0): nothing overflows.
//
// Why: the token-sequential kernel (gdn_cuda.cu) runs n dependent iterations per head with n_v blocks per
// sequence in flight; here a chunk is a few small matrix products, and the value columns are independent
// (u_j depends on column j of S only), so a head is split over D / 32 blocks of 32 columns each.
//
// Block (value head vh, 32-column slice j0 of it, sequence), 256 threads, one chunk after the other:
//   (1) each warp normalises rows of q and k (the key head's) into shared memory; beta, and the log
//       decays summed in row order into G by one thread;
//   (2) Gram tiles: thread (ti, si) computes k_t.k_s and q_t.k_s for t in 4ti.., s in 4si.., masked into
//       A (s < t) and B_ts = e^{G_t - G_s} q_t.k_s (s <= t);
//   (3) column j = lane, rows t = warp + 8m: (S0^T k_t)_j and (S0^T q_t)_j, giving X and e^{G_t} S0^T q_t;
//   (4) forward substitution U_t = X_t - sum_{s<t} A_ts U_s by warp 0 (lane = column), U in registers,
//       fully unrolled (two accumulators);
//   (5) outputs o_t = e^{G_t} S0^T q_t + sum_{s<=t} B_ts U_s, and (6) the state update, thread (rows
//       i = warp + 8m, column lane), both reading U only.
// Rows of the chunk past the sequence's end are zero (k = q = 0, beta = 0, G = G_last): they add nothing.
// Results depend only on the sequence's own rows and on how its prompt is cut into steps (chunk
// boundaries change the rounding, as on the CPU); batching never changes them.
#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gdn_cuda.h"
#include "backend/cuda/gdn_cuda_math.cuh"
#include "core/error.h"

namespace polykv::cuda {
namespace {

constexpr int kCL = 64;       // rows per chunk
constexpr int kJB = 32;       // value columns per block
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

// Sequences of at most A.min_rows rows are the token-sequential kernel's: skipped here.
using ChunkArgs = GdnRuleArgs;

// Shared memory of a block (dynamic; ~133 KB at D = 128). Row strides are padded: K and Q rows by one
// float (the Gram tiles walk 16 rows at once), the 64x64 matrices to a multiple of 4.
template <int D>
struct ChunkSmem {
  static constexpr int KL = D + 1, SL = kJB + 1, AL = kCL + 4;
  float k[kCL * KL];   // [t][i] the chunk's normalised keys
  float q[kCL * KL];   // [t][i] normalised queries times q_scale
  float s[D * SL];     // [i][j] the state's columns j0 .. j0 + 31
  float am[kCL * AL];  // [t][s] A_ts (s < t), else 0
  float bm[kCL * AL];  // [t][s] B_ts (s <= t), else 0
  float u[kCL * SL];   // [t][j] X, then U
  float o[kCL * SL];   // [t][j] e^{G_t} (S0^T q_t)_j
  float G[kCL], beta[kCL], w[kCL];  // cumulative log decay; beta; e^{G_last - G_s}
};

template <int D>
__global__ void __launch_bounds__(kThreads) gdn_chunked_kernel(const GdnSeqDevice* seqs, GdnShapeDevice sh,
                                                                ChunkArgs A) {
  static_assert(D % kJB == 0 && D % 32 == 0 && D <= 128, "head size: 32, 64 or 128");
  using Sm = ChunkSmem<D>;
  constexpr int KL = Sm::KL, SL = Sm::SL, AL = Sm::AL, NJB = D / kJB, PR = D / 32, SR = D / kWarps;
  extern __shared__ __align__(16) float smem_raw[];
  Sm& sm = *reinterpret_cast<Sm*>(smem_raw);
  const GdnSeqDevice sq = seqs[blockIdx.y];
  if (sq.n <= A.min_rows) return;  // the token-sequential kernel's sequence
  const int vh = int(blockIdx.x) / NJB, j0 = (int(blockIdx.x) % NJB) * kJB;
  const int nk = sh.n_k, nv = sh.n_v, C = sh.channels, kh = vh % nk;
  const int tid = int(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int64_t head = sh.conv_floats + int64_t(vh) * D * D;
  const float* S0 = sq.cur + int64_t(A.layer) * sh.layer_floats + head;
  float* S1 = sq.next + int64_t(A.layer) * sh.layer_floats + head;
  for (int e = tid; e < D * kJB; e += kThreads) {
    const int i = e / kJB, j = e % kJB;
    sm.s[i * SL + j] = S0[int64_t(i) * D + j0 + j];
  }
  const float dtb = A.dt_bias[vh], av = A.a[vh];

  for (int c0 = 0; c0 < sq.n; c0 += kCL) {
    const int nc = min(kCL, sq.n - c0);
    const int64_t row0 = int64_t(sq.row0) + c0;
    // (1) rows
    for (int t = warp; t < kCL; t += kWarps) {
      float qv[PR], kv[PR], sqq = 0.0f, skk = 0.0f;
      const float* r = A.qkv + (row0 + t) * C;
#pragma unroll
      for (int m = 0; m < PR; ++m) {
        qv[m] = t < nc ? r[kh * D + lane + 32 * m] : 0.0f;
        kv[m] = t < nc ? r[(nk + kh) * D + lane + 32 * m] : 0.0f;
        sqq = gdn::fma(qv[m], qv[m], sqq);
        skk = gdn::fma(kv[m], kv[m], skk);
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        sqq += __shfl_xor_sync(0xffffffffu, sqq, o);
        skk += __shfl_xor_sync(0xffffffffu, skk, o);
      }
      const float fq = gdn::l2_factor(sqq, A.norm_eps, A.q_scale), fk = gdn::l2_factor(skk, A.norm_eps, 1.0f);
#pragma unroll
      for (int m = 0; m < PR; ++m) {
        sm.q[t * KL + lane + 32 * m] = qv[m] * fq;
        sm.k[t * KL + lane + 32 * m] = kv[m] * fk;
      }
    }
    if (tid < kCL) {
      float g = 0.0f, b = 0.0f;
      if (tid < nc) {
        const int64_t row = row0 + tid;
        g = gdn::log_decay(A.alpha[row * nv + vh], dtb, av);
        b = gdn::sigmoid(A.beta_logit[row * nv + vh]);
      }
      sm.G[tid] = g;
      sm.beta[tid] = b;
    }
    __syncthreads();
    if (tid == 0) {  // G in row order, as the CPU sums it; rows past the end keep G_last
      float acc = 0.0f;
      for (int t = 0; t < kCL; ++t) sm.G[t] = acc += sm.G[t];
    }
    __syncthreads();

    // (2) Gram tiles
    {
      const int ti = tid >> 4, si = tid & 15;
      float kk[4][4], qk[4][4];
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int c = 0; c < 4; ++c) kk[r][c] = qk[r][c] = 0.0f;
#pragma unroll 4
      for (int i = 0; i < D; ++i) {
        float kt[4], qt[4], ks[4];
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          kt[r] = sm.k[(4 * ti + r) * KL + i];
          qt[r] = sm.q[(4 * ti + r) * KL + i];
          ks[r] = sm.k[(4 * si + r) * KL + i];
        }
#pragma unroll
        for (int r = 0; r < 4; ++r)
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            kk[r][c] = gdn::fma(kt[r], ks[c], kk[r][c]);
            qk[r][c] = gdn::fma(qt[r], ks[c], qk[r][c]);
          }
      }
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int t = 4 * ti + r, s = 4 * si + c;
          const float e = s <= t ? expf(sm.G[t] - sm.G[s]) : 0.0f;
          sm.am[t * AL + s] = s < t ? sm.beta[t] * e * kk[r][c] : 0.0f;
          sm.bm[t * AL + s] = e * qk[r][c];
        }
    }

    // (3) S0^T k_t and S0^T q_t for column j = lane, rows t = warp + 8m
    {
      constexpr int TR = kCL / kWarps;
      float ks[TR], qs[TR];
#pragma unroll
      for (int m = 0; m < TR; ++m) ks[m] = qs[m] = 0.0f;
#pragma unroll 4
      for (int i = 0; i < D; ++i) {
        const float sij = sm.s[i * SL + lane];
#pragma unroll
        for (int m = 0; m < TR; ++m) {
          ks[m] = gdn::fma(sm.k[(warp + kWarps * m) * KL + i], sij, ks[m]);
          qs[m] = gdn::fma(sm.q[(warp + kWarps * m) * KL + i], sij, qs[m]);
        }
      }
#pragma unroll
      for (int m = 0; m < TR; ++m) {
        const int t = warp + kWarps * m;
        const float eg = expf(sm.G[t]);
        const float v = t < nc ? A.qkv[(row0 + t) * C + 2 * nk * D + vh * D + j0 + lane] : 0.0f;
        sm.u[t * SL + lane] = sm.beta[t] * (v - eg * ks[m]);
        sm.o[t * SL + lane] = eg * qs[m];
      }
      if (tid < kCL) sm.w[tid] = tid < nc ? expf(sm.G[nc - 1] - sm.G[tid]) : 0.0f;
    }
    __syncthreads();

    // (4) forward substitution (warp 0)
    if (warp == 0) {
      float u[kCL];
#pragma unroll
      for (int t = 0; t < kCL; ++t) {
        float a0 = sm.u[t * SL + lane], a1 = 0.0f;
#pragma unroll
        for (int s = 0; s < t; ++s) {
          if (s & 1)
            a1 = gdn::fma(-sm.am[t * AL + s], u[s], a1);
          else
            a0 = gdn::fma(-sm.am[t * AL + s], u[s], a0);
        }
        u[t] = a0 + a1;
      }
#pragma unroll
      for (int t = 0; t < kCL; ++t) sm.u[t * SL + lane] = u[t];
    }
    __syncthreads();

    // (5) outputs
    for (int t = warp; t < nc; t += kWarps) {
      float acc = sm.o[t * SL + lane];
      for (int s = 0; s <= t; ++s) acc = gdn::fma(sm.bm[t * AL + s], sm.u[s * SL + lane], acc);
      A.out[((row0 + t) * nv + vh) * D + j0 + lane] = acc;
    }
    // (6) the state: rows i = warp + 8m of column lane
    {
      const float egl = expf(sm.G[nc - 1]);
      float acc[SR];
#pragma unroll
      for (int m = 0; m < SR; ++m) acc[m] = egl * sm.s[(warp + kWarps * m) * SL + lane];
      for (int s = 0; s < nc; ++s) {
        const float us = sm.w[s] * sm.u[s * SL + lane];
#pragma unroll
        for (int m = 0; m < SR; ++m) acc[m] = gdn::fma(sm.k[s * KL + warp + kWarps * m], us, acc[m]);
      }
#pragma unroll
      for (int m = 0; m < SR; ++m) sm.s[(warp + kWarps * m) * SL + lane] = acc[m];
    }
    __syncthreads();  // the next chunk rewrites k, q, G; the state is complete
  }
  for (int e = tid; e < D * kJB; e += kThreads) {
    const int i = e / kJB, j = e % kJB;
    S1[int64_t(i) * D + j0 + j] = sm.s[i * SL + j];
  }
}

template <int D>
void launch(const GdnSeqDevice* seqs, int n_seq, const GdnShapeDevice& sh, const ChunkArgs& A, cudaStream_t s) {
  const size_t bytes = sizeof(ChunkSmem<D>);
  // Over 48 KB: the opt-in, once per device. A step's first run is eager (cuda_backend.cpp: graphs record a step
  // the second time they see it), so this never runs inside a graph capture.
  static bool opted_in[64] = {};
  int dev = 0;
  POLYKV_CUDA_CHECK(cudaGetDevice(&dev));
  check(dev >= 0 && dev < 64, "CUDA gated_delta_rule_chunked: device ", dev, " (at most 64)");
  if (!opted_in[dev]) {
    POLYKV_CUDA_CHECK(
        cudaFuncSetAttribute(gdn_chunked_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
    opted_in[dev] = true;
  }
  const dim3 grid(unsigned(sh.n_v * (D / kJB)), unsigned(n_seq));
  gdn_chunked_kernel<D><<<grid, kThreads, bytes, s>>>(seqs, sh, A);
  POLYKV_CUDA_LAUNCHED();
}

}  // namespace

bool gdn_chunked_supported(int d) {
  if (d != 32 && d != 64 && d != 128) return false;
  // The block's shared memory (~133 KB at d = 128) must fit the device's opt-in limit (sm_86 / sm_89: ~99 KB;
  // there d = 128 stays token by token). Asked once per device.
  static int optin[64] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return false;
  if (optin[dev] == 0 && cudaDeviceGetAttribute(&optin[dev], cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess)
    return false;
  const size_t bytes = d == 32 ? sizeof(ChunkSmem<32>) : d == 64 ? sizeof(ChunkSmem<64>) : sizeof(ChunkSmem<128>);
  return bytes <= size_t(optin[dev]);
}

void gated_delta_rule_chunked(const GdnSeqDevice* seqs, int n_seq, const GdnShapeDevice& sh, const GdnRuleArgs& A,
                              cudaStream_t s) {
  check(gdn_chunked_supported(sh.d), "CUDA gated_delta_rule_chunked: head size ", sh.d, " (32, 64 or 128)");
  check(A.layer >= 0 && A.layer < sh.n_layer, "CUDA gated_delta_rule_chunked: state layer ", A.layer, " out of range");
  if (n_seq == 0) return;
  switch (sh.d) {
    case 32: launch<32>(seqs, n_seq, sh, A, s); break;
    case 64: launch<64>(seqs, n_seq, sh, A, s); break;
    default: launch<128>(seqs, n_seq, sh, A, s); break;
  }
}

}  // namespace polykv::cuda
