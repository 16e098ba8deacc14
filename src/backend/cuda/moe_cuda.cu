// Mixture-of-experts kernels (moe_cuda.h says what runs and why). The arithmetic is in
// moe_cuda_hd.cuh (routing, activation, slot sum) and matmul_cuda_dot.cuh (the mat-vec dots).
#include "backend/cuda/moe_cuda.h"

#include <algorithm>

#include "backend/cuda/matmul_cuda_acts.cuh"
#include "backend/cuda/matmul_cuda_internal.h"
#include "backend/cuda/matmul_cuda_launch.cuh"
#include "backend/cuda/matmul_cuda_split.h"
#include "backend/cuda/moe_cuda_hd.cuh"
#include "backend/cuda/moe_cuda_internal.h"
#include "core/error.h"

#include <cstdlib>
#include <cstring>

namespace polykv::cuda {
namespace {

constexpr int kWarps = 4;  // warps per block of the mat-vec and routing kernels
constexpr int kThreads = 32 * kWarps;

size_t round_up(size_t v, size_t m) { return (v + m - 1) / m * m; }

unsigned grid_stride_blocks(int64_t total, int threads) {
  return unsigned(std::clamp<int64_t>((total + threads - 1) / threads, 1, 65535));
}

// ---- routing -------------------------------------------------------------------------------

__global__ void __launch_bounds__(kThreads)
    moe_route_kernel(const float* __restrict__ logits, int n, int ne, int k, bool all_softmax,
                     int32_t* __restrict__ ids, float* __restrict__ weights) {
  wait_for_previous_grid();
  allow_next_grid();
  const int row = int(blockIdx.x) * kWarps + int(threadIdx.x / 32);
  const int lane = int(threadIdx.x % 32);
  if (row >= n) return;  // the whole warp
  int i;
  float w;
  route_row_warp(logits + int64_t(row) * ne, ne, k, all_softmax, lane, i, w);
  if (lane < k) {
    ids[int64_t(row) * k + lane] = i;
    weights[int64_t(row) * k + lane] = w;
  }
}

// One row per block of kRankThreads threads (n_expert <= kRankThreads): the picks by ranks (route_block_picks,
// one barrier), then warp 0 weighs them as route_row_warp does; a row with a NaN logit takes route_row_warp's
// rounds. The same ids and weights as moe_route_kernel.
constexpr int kRankThreads = 256;
__global__ void __launch_bounds__(kRankThreads)
    moe_route_rank_kernel(const float* __restrict__ logits, int ne, int k, bool all_softmax, int32_t* __restrict__ ids,
                          float* __restrict__ weights) {
  __shared__ float l_s[kRankThreads];
  __shared__ int pick_s[32];
  __shared__ float pickv_s[32];
  wait_for_previous_grid();
  allow_next_grid();
  const int64_t row = blockIdx.x;
  const int lane = int(threadIdx.x % 32), warp = int(threadIdx.x / 32);
  if (threadIdx.x < unsigned(ne)) l_s[threadIdx.x] = logits[row * ne + threadIdx.x];
  __syncthreads();
  const bool nan = route_block_picks<kRankThreads>(l_s, ne, k, pick_s, pickv_s);
  if (warp != 0) return;
  int i;
  float w;
  if (!nan) {
    i = lane < k ? pick_s[lane] : -1;
    w = route_weight_warp(l_s, ne, k, all_softmax, lane, lane < k ? pickv_s[lane] : 0.0f);
  } else {
    route_row_warp(l_s, ne, k, all_softmax, lane, i, w);
  }
  if (lane < k) {
    ids[row * k + lane] = i;
    weights[row * k + lane] = w;
  }
}

__global__ void add_sigmoid_gated_kernel(float* __restrict__ x, const float* __restrict__ y,
                                         const float* __restrict__ g, int64_t total, int cols) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const float s = 1.0f / hd::fadd(1.0f, expf(-g[i / cols]));
    x[i] = hd::fadd(x[i], hd::fmul(s, y[i]));
  }
}

// ---- grouping ------------------------------------------------------------------------------

// One block: counts per expert, items of up to `chunk` pairs (in expert order; warp 0 scans the counts
// 32 experts at a time), and perm (slots grouped by expert; the
// order inside an expert is whatever the atomics give: no result depends on it, each column of a
// mat-vec being computed on its own). Slots with an expert out of range are left out.
__global__ void moe_group_kernel(const int32_t* __restrict__ ids, int n_slots, int ne, int chunk,
                                 int32_t* __restrict__ perm, hd::MoeItem* __restrict__ items,
                                 int32_t* __restrict__ n_items) {
  extern __shared__ int32_t sm[];
  int32_t* cnt = sm;       // [ne]
  int32_t* pos = sm + ne;  // [ne]
  for (int e = int(threadIdx.x); e < ne; e += int(blockDim.x)) cnt[e] = 0;
  __syncthreads();
  for (int s = int(threadIdx.x); s < n_slots; s += int(blockDim.x)) {
    const int e = ids[s];
    if (e >= 0 && e < ne) atomicAdd(&cnt[e], 1);
  }
  __syncthreads();
  if (threadIdx.x < 32) {  // warp 0: exclusive scans of the counts and item counts, 32 experts a round
    const int lane = int(threadIdx.x);
    int off = 0, ni = 0;
    for (int e0 = 0; e0 < ne; e0 += 32) {
      const int e = e0 + lane;
      const int c = e < ne ? cnt[e] : 0;
      const int m = (c + chunk - 1) / chunk;  // this expert's items
      int sc = c, sm_ = m;                    // inclusive scans over the lanes
#pragma unroll
      for (int d = 1; d < 32; d *= 2) {
        const int oc = __shfl_up_sync(0xffffffffu, sc, d), om = __shfl_up_sync(0xffffffffu, sm_, d);
        if (lane >= d) {
          sc += oc;
          sm_ += om;
        }
      }
      if (e < ne) {
        const int p0 = off + sc - c, i0 = ni + sm_ - m;
        pos[e] = p0;
        for (int j = 0; j < m; ++j) items[i0 + j] = {e, p0 + j * chunk, min(chunk, c - j * chunk), 0};
      }
      off += __shfl_sync(0xffffffffu, sc, 31);
      ni += __shfl_sync(0xffffffffu, sm_, 31);
    }
    if (lane == 0) *n_items = ni;
  }
  __syncthreads();
  for (int s = int(threadIdx.x); s < n_slots; s += int(blockDim.x)) {
    const int e = ids[s];
    if (e >= 0 && e < ne) perm[atomicAdd(&pos[e], 1)] = s;
  }
}

// ---- expert mat-vecs -------------------------------------------------------------------------

using MatArgs = MoeMatArgs;  // moe_cuda_internal.h

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off /= 2) v = hd::fadd(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// The warp's item, matrix part and first row; false if the warp has nothing to do.
template <int R, int NC>
__device__ __forceinline__ bool warp_work(const MatArgs& a, hd::MoeItem& it, int& part, int64_t& row0,
                                          const uint8_t* (&rows)[R], int32_t (&slot)[NC], int64_t (&arow)[NC]) {
  if (int(blockIdx.y) >= *a.n_items) return false;
  it = a.items[blockIdx.y];
  const int64_t per_part = int64_t(gridDim.x) / a.n_parts;
  part = int(blockIdx.x / per_part);
  row0 = ((int64_t(blockIdx.x) % per_part) * kWarps + threadIdx.x / 32) * R;
  if (row0 >= a.n_out) return false;
  const uint8_t* w = a.base[part] + size_t(it.expert) * a.expert_stride;
#pragma unroll
  for (int r = 0; r < R; ++r) rows[r] = w + size_t(min(row0 + r, a.n_out - 1)) * a.row_stride;
#pragma unroll
  for (int c = 0; c < NC; ++c) {
    slot[c] = a.perm[it.first + min(c, it.count - 1)];  // columns past count repeat the last
    arow[c] = slot[c] / a.col_div;
  }
  return true;
}

// Every lane holds every sum after warp_sum; lane r * NC + c stores (row0 + r, column c) + bias.
template <int R, int NC>
__device__ __forceinline__ void store(const MatArgs& a, const hd::MoeItem& it, int part, int64_t row0,
                                      const int32_t (&slot)[NC], float (&acc)[R][NC]) {
  const int lane = int(threadIdx.x % 32);
  const float* bias = a.bias[part];
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int c = 0; c < NC; ++c) {
      float v = warp_sum(acc[r][c]);
      if (lane == r * NC + c && c < it.count && row0 + r < a.n_out) {
        if (bias) v = hd::fadd(v, bias[int64_t(it.expert) * a.n_out + row0 + r]);
        a.y[part][int64_t(slot[c]) * a.n_out + row0 + r] = v;
      }
    }
  }
}

// Quantized experts: lane_dot_q's unit walk (matmul_cuda_dot.cuh) with one activation row per column.
template <class T, int NC, int A>
__global__ void __launch_bounds__(kThreads) moe_matvec_q_kernel(MatArgs a) {
  constexpr int R = hd::rows_per_warp_q<T, NC>();
  hd::MoeItem it;
  int part;
  int64_t row0;
  const uint8_t* rows[R];
  int32_t slot[NC];
  int64_t arow[NC];
  if (!warp_work<R, NC>(a, it, part, row0, rows, slot, arow)) return;
  const int lane = int(threadIdx.x % 32);
  const int64_t n_blocks_x = a.n_in / hd::kActBlock;
  const int64_t n_units = a.n_in / T::kBlockValues * T::kParts;
  float acc[R][NC] = {};
  for (int64_t u = lane; u < n_units; u += 32) {
    const int64_t blk = u / T::kParts;
    const int p = int(u % T::kParts);
    typename T::Unit wu[R];
#pragma unroll
    for (int r = 0; r < R; ++r) T::template load<A>(rows[r] + blk * T::kBlockBytes, p, wu[r]);
#pragma unroll
    for (int c = 0; c < NC; ++c) {  // unit_step's order: column by column, rows inside
      hd::XUnit<T> xu;
      hd::load_x<T>(a.xq + arow[c] * a.n_in, a.xs + arow[c] * n_blocks_x, blk, p, xu);
#pragma unroll
      for (int r = 0; r < R; ++r) acc[r][c] = hd::unit_dot<T>(wu[r], xu, acc[r][c]);
    }
  }
  store<R, NC>(a, it, part, row0, slot, acc);
}

// Float experts: lane_dot_f's arithmetic (units in order, one fma per value) on padded f32 rows.
template <class F, int NC>
__global__ void __launch_bounds__(kThreads) moe_matvec_f_kernel(MatArgs a) {
  constexpr int R = hd::rows_per_warp_f<F, NC>();
  constexpr int V = F::kValues;
  hd::MoeItem it;
  int part;
  int64_t row0;
  const uint8_t* rows[R];
  int32_t slot[NC];
  int64_t arow[NC];
  if (!warp_work<R, NC>(a, it, part, row0, rows, slot, arow)) return;
  const int lane = int(threadIdx.x % 32);
  const int64_t n_units = (a.n_in + V - 1) / V;
  float acc[R][NC] = {};
  for (int64_t u = lane; u < n_units; u += 32) {
    hd::FUnit<V> wu[R];
#pragma unroll
    for (int r = 0; r < R; ++r) hd::load_float_unit<F, false>(rows[r], u, a.n_in, wu[r]);
#pragma unroll
    for (int c = 0; c < NC; ++c) {
      hd::XFCols<V, 1> x;
      hd::load_xf_cols<V, 1>(a.xf + arow[c] * a.ldx, a.ldx, u, 1, x);
#pragma unroll
      for (int r = 0; r < R; ++r) {
#pragma unroll
        for (int i = 0; i < V; ++i) acc[r][c] = hd::fma(wu[r].w[i], x.v[0][i], acc[r][c]);
      }
    }
  }
  store<R, NC>(a, it, part, row0, slot, acc);
}

// ---- activation, slot sum ------------------------------------------------------------------

// h = act(g, u) of every slot as 8-bit activations of the down mat-vec: one warp per block of 32.
__global__ void moe_act_q_kernel(const float* __restrict__ g, const float* __restrict__ u, int64_t n_blocks,
                                 bool clamped, float alpha, float limit, int8_t* __restrict__ qs,
                                 hd::ActScale* __restrict__ s) {
  const int64_t b = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (b >= n_blocks) return;
  const int lane = int(threadIdx.x % 32);
  const int64_t i = b * 32 + lane;
  quantize_act_block_warp(hd::moe_act(g[i], u[i], clamped, alpha, limit), lane, qs + b * 32, s + b);
}

// The same as f32 rows padded with zeros to ldh values (float down matrices).
__global__ void moe_act_f_kernel(const float* __restrict__ g, const float* __restrict__ u, int64_t n_ff, int64_t ldh,
                                 int64_t total, bool clamped, float alpha, float limit, float* __restrict__ h) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t slot = i / ldh, c = i % ldh;
    h[i] = c < n_ff ? hd::moe_act(g[slot * n_ff + c], u[slot * n_ff + c], clamped, alpha, limit) : 0.0f;
  }
}

__global__ void moe_slot_sum_kernel(const float* __restrict__ y, const int32_t* __restrict__ ids,
                                    const float* __restrict__ weights, int n, int k, int ne, int64_t n_embd,
                                    float* __restrict__ out) {
  const int64_t total = int64_t(n) * n_embd;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = i / n_embd, c = i % n_embd;
    float o = 0.0f;
    for (int j = 0; j < k; ++j) {
      const int64_t slot = t * k + j;
      const int e = ids[slot];
      if (e < 0 || e >= ne) {
        o = __int_as_float(0x7fc00000);
        break;
      }
      o = hd::slot_sum_step(o, weights[slot], y[slot * n_embd + c], j);
    }
    out[i] = o;
  }
}

// ---- launchers -------------------------------------------------------------------------------

template <class Fn>
void by_width(int ncols, Fn&& fn) {
  if (ncols == 1) fn(std::integral_constant<int, 1>{});
  else if (ncols == 2) fn(std::integral_constant<int, 2>{});
  else if (ncols <= 4) fn(std::integral_constant<int, 4>{});
  else fn(std::integral_constant<int, 8>{});
}

// Launches the mat-vec of a (parts share stack geometry and type) over max_items items, NC columns.
template <int NC>
void launch_mat(const ExpertStack& st, MatArgs a, int64_t max_items, cudaStream_t s) {
  a.expert_stride = st.expert_stride;
  a.row_stride = st.row_stride;
  a.n_out = st.n_out;
  a.n_in = st.n_in;
  // Every row is at base[p] + e * expert_stride (a multiple of 16) + o * row_stride.
  int align = 16;
  for (int p = 0; p < a.n_parts; ++p)
    align = std::min(align, hd::common_alignment(reinterpret_cast<uintptr_t>(a.base[p]), st.row_stride));
  check(max_items <= 65535, "CUDA moe_experts: ", max_items, " work items (at most 65535 per launch)");
  const bool q = hd::visit_quant_decoder(st.type, [&](auto dec) {
    using T = decltype(dec);
    constexpr int R = hd::rows_per_warp_q<T, NC>();
    const int64_t blocks = (st.n_out + int64_t(kWarps) * R - 1) / (int64_t(kWarps) * R);
    const dim3 grid(unsigned(blocks * a.n_parts), unsigned(max_items));
    if (T::kMaxAlign > 2 && align >= T::kMaxAlign)
      moe_matvec_q_kernel<T, NC, (T::kMaxAlign > 2 ? T::kMaxAlign : 2)><<<grid, kThreads, 0, s>>>(a);
    else
      moe_matvec_q_kernel<T, NC, 2><<<grid, kThreads, 0, s>>>(a);
  });
  if (!q) {
    const bool f = hd::visit_float_decoder(st.type, [&](auto dec) {
      using F = decltype(dec);
      constexpr int R = hd::rows_per_warp_f<F, NC>();
      const int64_t blocks = (st.n_out + int64_t(kWarps) * R - 1) / (int64_t(kWarps) * R);
      const dim3 grid(unsigned(blocks * a.n_parts), unsigned(max_items));
      moe_matvec_f_kernel<F, NC><<<grid, kThreads, 0, s>>>(a);
    });
    check(f, "CUDA moe_experts: no kernel for ", dtype_name(st.type), " experts");
  }
  POLYKV_CUDA_LAUNCHED();
}

bool same_geometry(const ExpertStack& a, const ExpertStack& b) {
  return a.type == b.type && a.n_in == b.n_in && a.n_out == b.n_out && a.row_stride == b.row_stride &&
         a.expert_stride == b.expert_stride && a.n_expert == b.n_expert && a.layout == b.layout;
}

// The mat-vec of one stack, v1 (ggml rows) or v2 (split layout) by the stack's layout.
template <int NC>
void launch_any(const ExpertStack& st, const MatArgs& a, int64_t max_items, cudaStream_t s) {
  if (st.layout == WeightLayout::CudaSplit)
    launch_moe_split_matvec(st, a, max_items, NC, s);
  else
    launch_mat<NC>(st, a, max_items, s);
}

// POLYKV_CUDA_MOE_KERNEL: 0 not read yet; 1 or 2. Forced by set_moe_kernel.
int g_moe_kernel = 0, g_moe_kernel_forced = 0;
// POLYKV_CUDA_MOE_MMA_MIN_SLOTS_PER_EXPERT: -1 not read yet.
int g_mma_min = -1, g_mma_min_forced = 0;

}  // namespace

void moe_route(const float* logits, int n, const MoeRouting& r, int32_t* ids, float* weights, CudaContext& ctx) {
  check(r.n_used >= 1 && r.n_used <= r.n_expert, "moe_route: ", r.n_used, " experts per token out of ", r.n_expert);
  check(r.n_used <= 32, "CUDA moe_route: at most 32 experts per token (", r.n_used, ")");
  if (n <= 0) return;
  if (r.n_expert <= kRankThreads && moe_rank_route_on()) {
    launch_kernel(moe_route_rank_kernel, dim3(unsigned(n)), dim3(kRankThreads), 0, ctx.stream(), matvec_pdl(ctx),
                  logits, r.n_expert, r.n_used, r.gating == MoeGating::SoftmaxTopK, ids, weights);
    POLYKV_CUDA_LAUNCHED();
    return;
  }
  launch_kernel(moe_route_kernel, dim3(unsigned((n + kWarps - 1) / kWarps)), dim3(kThreads), 0, ctx.stream(),
                matvec_pdl(ctx), logits, n, r.n_expert, r.n_used, r.gating == MoeGating::SoftmaxTopK, ids, weights);
  POLYKV_CUDA_LAUNCHED();
}

void add_sigmoid_gated(float* x, const float* y, const float* g, int rows, int cols, cudaStream_t s) {
  const int64_t total = int64_t(rows) * cols;
  if (total <= 0) return;
  add_sigmoid_gated_kernel<<<grid_stride_blocks(total, 256), 256, 0, s>>>(x, y, g, total, cols);
  POLYKV_CUDA_LAUNCHED();
}

int moe_kernel_version() {
  if (g_moe_kernel_forced) return g_moe_kernel_forced;
  if (g_moe_kernel == 0) {
    const char* e = std::getenv("POLYKV_CUDA_MOE_KERNEL");
    g_moe_kernel = (e && std::strcmp(e, "v1") == 0) ? 1 : 2;
  }
  return g_moe_kernel;
}

void set_moe_kernel(int version) { g_moe_kernel_forced = version == 1 || version == 2 ? version : 0; }

bool moe_split_upload(const WeightMatrix& host) {
  return moe_kernel_version() == 2 && host.layout == WeightLayout::Rows && split_layout_fits(host) &&
         split_type_enabled(host.type) &&
         host.n_in % hd::kActBlock == 0;
}

size_t expert_split_stride(const WeightMatrix& host) {
  return round_up(split_row_stride(host.type, host.n_in) * size_t(host.n_out), 16);
}

bool moe_uses_mma(int n, int k, int n_expert) {
  int m = g_mma_min_forced;
  if (m < 0) return true;
  if (m == 0) {
    if (g_mma_min < 0) {
      const char* e = std::getenv("POLYKV_CUDA_MOE_MMA_MIN_SLOTS_PER_EXPERT");
      g_mma_min = (e && *e) ? std::max(1, std::atoi(e)) : 2;
    }
    m = g_mma_min;
  }
  return int64_t(n) * k >= int64_t(m) * n_expert;
}

void set_moe_mma_min(int slots_per_expert) { g_mma_min_forced = slots_per_expert < 0 ? -1 : slots_per_expert; }

size_t expert_stack_stride(const WeightMatrix& host) { return round_up(host.row_stride * size_t(host.n_out), 16); }

ExpertStack expert_stack(const std::vector<WeightMatrix>& experts) {
  check(!experts.empty(), "CUDA moe_experts: no experts");
  const WeightMatrix& w0 = experts[0];
  ExpertStack st;
  st.type = w0.type;
  st.n_in = w0.n_in;
  st.n_out = w0.n_out;
  st.row_stride = w0.row_stride;
  st.base = static_cast<const uint8_t*>(w0.data);
  st.n_expert = int(experts.size());
  st.layout = w0.layout;
  st.expert_stride = experts.size() > 1 ? size_t(static_cast<const uint8_t*>(experts[1].data) - st.base) : 0;
  check(has_weight_kernels(st.type), "CUDA moe_experts: no kernels for ", dtype_name(st.type), " experts");
  check(st.n_in > 0 && st.n_out > 0 && st.n_in % dtype_info(st.type).block_size == 0,
        "CUDA moe_experts: bad expert shape ", st.n_out, "x", st.n_in);
  check(is_float_weight(st.type) || st.n_in % hd::kActBlock == 0, "CUDA moe_experts: n_in ", st.n_in,
        " is not a multiple of 32");
  for (size_t e = 0; e < experts.size(); ++e) {
    const WeightMatrix& w = experts[e];
    check(w.layout == st.layout && w.type == st.type && w.n_in == st.n_in && w.n_out == st.n_out &&
              w.row_stride == st.row_stride && static_cast<const uint8_t*>(w.data) == st.base + e * st.expert_stride,
          "CUDA moe_experts: the experts are not one stack (upload them with Backend::upload_experts)");
  }
  if (st.layout == WeightLayout::CudaSplit) {
    check(split_layout_fits(w0) && st.row_stride == split_row_stride(st.type, st.n_in) &&
              reinterpret_cast<uintptr_t>(st.base) % 16 == 0 && st.expert_stride % 16 == 0,
          "CUDA moe_experts: bad split-layout expert stack");
    return st;
  }
  check(st.layout == WeightLayout::Rows, "CUDA moe_experts: unknown expert layout");
  const int need = st.type == DType::F32 ? 4 : st.type == DType::MXFP4 ? 1 : 2;
  check(hd::common_alignment(reinterpret_cast<uintptr_t>(st.base), st.row_stride) >= need &&
            (st.expert_stride % 16) == 0,
        "CUDA moe_experts: misaligned expert rows");
  return st;
}

namespace {

// The routing to run first when the fused one-token path does not take the step (moe_route_experts).
struct RouteFirst {
  const float* logits;
  MoeRouting r;
  int32_t* ids;  // the routing's outputs: the same buffers experts_impl reads as ids / weights
  float* weights;
};

void experts_impl(const MoeExperts& w, const float* x, const int32_t* ids, const float* weights, int n, int k,
                  float* out, CudaContext& ctx, const RouteFirst* route, const MoeXActs* xa);

}  // namespace

void moe_experts(const MoeExperts& w, const float* x, const int32_t* ids, const float* weights, int n, int k,
                 float* out, CudaContext& ctx, const MoeXActs* xa) {
  experts_impl(w, x, ids, weights, n, k, out, ctx, nullptr, xa);
}

void moe_route_experts(const MoeExperts& w, const float* x, const float* logits, const MoeRouting& r, int n,
                       int32_t* ids, float* weights, float* out, CudaContext& ctx, const MoeXActs* xa) {
  check(r.n_used >= 1 && r.n_used <= r.n_expert && r.n_expert == w.n_expert(), "moe_route_experts: ", r.n_used,
        " experts per token out of ", r.n_expert, " (the layer has ", w.n_expert(), ")");
  const RouteFirst route{logits, r, ids, weights};
  if (!moe_route_in_launch()) {  // POLYKV_CUDA_MOE_FUSED=noroute: the routing kernel first (A/B runs)
    moe_route(logits, n, r, ids, weights, ctx);
    experts_impl(w, x, ids, weights, n, r.n_used, out, ctx, nullptr, xa);
    return;
  }
  experts_impl(w, x, ids, weights, n, r.n_used, out, ctx, &route, xa);
}

namespace {

void experts_impl(const MoeExperts& w, const float* x, const int32_t* ids, const float* weights, int n, int k,
                  float* out, CudaContext& ctx, const RouteFirst* route, const MoeXActs* xa) {
  check(n >= 0 && k >= 1 && k <= w.n_expert(), "moe_experts: ", k, " experts per token out of ", w.n_expert());
  if (n == 0) return;
  const ExpertStack gs = expert_stack(w.gate), us = expert_stack(w.up), ds = expert_stack(w.down);
  const int ne = w.n_expert(), E = w.n_embd, F = w.n_ff;
  check(gs.n_in == E && gs.n_out == F && us.n_in == E && us.n_out == F && ds.n_in == F && ds.n_out == E &&
            int(w.up.size()) == ne && int(w.down.size()) == ne,
        "CUDA moe_experts: expert shapes do not match n_embd ", E, " / n_ff ", F);
  check(is_float_weight(gs.type) == is_float_weight(us.type), "CUDA moe_experts: gate and up of different kinds");
  check(ne <= 8192, "CUDA moe_experts: at most 8192 experts (", ne, ")");
  const cudaStream_t s = ctx.stream();
  const int64_t n_slots = int64_t(n) * k;
  // The tensor-core path (v2): every stack in the split layout and many tokens per expert.
  const bool all_split = gs.layout == WeightLayout::CudaSplit && us.layout == WeightLayout::CudaSplit &&
                         ds.layout == WeightLayout::CudaSplit;
  const bool mma = all_split && moe_uses_mma(n, k, ne);
  // Column width of the mat-vecs: an expert gets at most n pairs (a token picks it once); items of
  // the mma path hold up to kMoeMmaCols pairs.
  // Also no wider than the expected pairs per expert need: an item's kernel computes all its width's
  // columns (the extra ones repeat the last), so 8 columns for experts of 1-2 pairs multiplied the
  // dot work by 4-8 (H200, qwen3-30b-a3b at n = 8: slower than reading the weights). Width is
  // pow2(ceil(n k / n_expert) + 1); the width never changes a result.
  const int64_t avg = (n_slots + ne - 1) / ne;
  const int want = avg + 1 <= 1 ? 1 : avg + 1 <= 2 ? 2 : avg + 1 <= 4 ? 4 : 8;
  const int width = std::min(n == 1 ? 1 : n == 2 ? 2 : n <= 4 ? 4 : 8, want);
  const int chunk = mma ? kMoeMmaCols : width;
  const int64_t max_items = hd::moe_items_bound(n_slots, ne, chunk);

  // Scratch (Scratch::Moe): perm, items, n_items, g, u, h (down's activations), y.
  const bool down_f = is_float_weight(ds.type);
  const int64_t ldh = int64_t(round_up(size_t(F), 8));
  const size_t sz_perm = round_up(size_t(n_slots) * 4, 256), sz_items = round_up(size_t(max_items) * 16, 256),
               sz_n = 256, sz_gu = round_up(size_t(n_slots) * size_t(F) * 4, 256),
               sz_hq = mma      ? round_up(size_t(n_slots) * size_t(F) * 2, 256)
                       : down_f ? round_up(size_t(n_slots) * size_t(ldh) * 4, 256)
                                : round_up(size_t(n_slots) * size_t(F), 256) +
                                      round_up(size_t(n_slots) * size_t(F / hd::kActBlock) * sizeof(hd::ActScale), 256),
               sz_y = round_up(size_t(n_slots) * size_t(E) * 4, 256);
  uint8_t* p = static_cast<uint8_t*>(ctx.scratch(Scratch::Moe, sz_perm + sz_items + sz_n + 2 * sz_gu + sz_hq + sz_y));
  auto* perm = reinterpret_cast<int32_t*>(p);
  auto* items = reinterpret_cast<hd::MoeItem*>(p + sz_perm);
  auto* n_items = reinterpret_cast<int32_t*>(p + sz_perm + sz_items);
  auto* g = reinterpret_cast<float*>(p + sz_perm + sz_items + sz_n);
  auto* u = g + sz_gu / 4;
  uint8_t* h = p + sz_perm + sz_items + sz_n + 2 * sz_gu;
  auto* y = reinterpret_cast<float*>(h + sz_hq);

  const bool direct = all_split && !mma && n == 1;
  // The fused one-token path: gate+up with the activation (and the routing), then down with the slot sum.
  if (direct && !down_f && moe_decode_fused() && moe_decode_fused_takes(gs, us, ds, k)) {
    MoeDecodeArgs da;
    da.x = x;
    // x's 8-bit blocks from the norm that wrote x
    if (xa != nullptr && xa->qs != nullptr && E <= kMoeXActsMaxEmbd && moe_x_acts_on()) {
      da.xq_in = xa->qs;
      da.xs_in = static_cast<const hd::ActScale*>(xa->scales);
      note_moe_x_acts_taken();
    }
    da.ids = ids;
    da.weights = weights;
    if (route && moe_decode_route_fits(gs, k, ctx)) {
      da.logits = route->logits;
      da.all_softmax = route->r.gating == MoeGating::SoftmaxTopK;
      da.ids_out = route->ids;
      da.weights_out = route->weights;
    } else if (route) {  // gate+up takes more than one wave: the routing kernel first (ids / weights are its outputs)
      moe_route(route->logits, n, route->r, route->ids, route->weights, ctx);
    }
    da.gate_bias = w.gate_bias;
    da.up_bias = w.up_bias;
    da.down_bias = w.down_bias;
    da.clamped = w.act == MoeActivation::SwiGLUClamped;
    da.alpha = w.alpha;
    da.limit = w.limit;
    da.hq = reinterpret_cast<int8_t*>(h);
    da.hs = reinterpret_cast<hd::ActScale*>(h + round_up(size_t(n_slots) * size_t(F), 256));
    da.out = out;
    da.k = k;
    da.n_expert = ne;
    launch_moe_decode_fused(gs, us, ds, da, ctx);
    return;
  }
  if (route) moe_route(route->logits, n, route->r, route->ids, route->weights, ctx);
  // 1. grouping (none for one token on split stacks: the v2 mat-vec takes the k slots as items)
  const int64_t grid_items = direct ? k : max_items;
  if (!direct) {
    moe_group_kernel<<<1, 512, size_t(2) * size_t(ne) * sizeof(int32_t), s>>>(ids, int(n_slots), ne, chunk, perm,
                                                                              items, n_items);
    POLYKV_CUDA_LAUNCHED();
  }
  // 2. x's activations (before anything writes out, which may alias x)
  MatArgs a{};
  if (mma) {
    a.x16 = mmq_prepare_x(x, E, n, ctx);
  } else {
    const ActView ax = prepare_acts(w.gate[0], x, n, ctx);
    a.xq = ax.qs;
    a.xs = ax.s;
    a.xf = ax.xf;
    a.ldx = ax.ldx;
  }
  // 3. gate and up
  a.perm = perm;
  a.items = items;
  a.n_items = n_items;
  a.col_div = k;
  a.direct_ids = direct ? ids : nullptr;
  a.n_expert = ne;
  const bool together = same_geometry(gs, us);
  auto gate_up = [&](auto&& launch) {
    if (together) {
      MatArgs b = a;
      b.n_parts = 2;
      b.base[0] = gs.base;
      b.base[1] = us.base;
      b.bias[0] = w.gate_bias;
      b.bias[1] = w.up_bias;
      b.y[0] = g;
      b.y[1] = u;
      launch(gs, b);
    } else {
      MatArgs b = a;
      b.n_parts = 1;
      b.base[0] = b.base[1] = gs.base;
      b.bias[0] = b.bias[1] = w.gate_bias;
      b.y[0] = b.y[1] = g;
      launch(gs, b);
      MatArgs c = a;  // x's activations serve both (both quantized: the same 8-bit blocks; or both float)
      c.n_parts = 1;
      c.base[0] = c.base[1] = us.base;
      c.bias[0] = c.bias[1] = w.up_bias;
      c.y[0] = c.y[1] = u;
      launch(us, c);
    }
  };
  if (mma) {
    gate_up([&](const ExpertStack& st, const MatArgs& b) { launch_moe_split_mma(st, b, max_items, s); });
  } else {
    by_width(width, [&](auto nc) {
      gate_up([&](const ExpertStack& st, const MatArgs& b) { launch_any<decltype(nc)::value>(st, b, grid_items, s); });
    });
  }
  // 4. activation -> the down mat-vec's input
  const bool clamped = w.act == MoeActivation::SwiGLUClamped;
  MatArgs d{};
  d.perm = perm;
  d.items = items;
  d.n_items = n_items;
  d.col_div = 1;
  d.direct_ids = a.direct_ids;
  d.n_expert = ne;
  d.n_parts = 1;
  d.base[0] = d.base[1] = ds.base;
  d.bias[0] = d.bias[1] = w.down_bias;
  d.y[0] = d.y[1] = y;
  if (mma) {
    launch_moe_act_f16(g, u, n_slots * F, clamped, w.alpha, w.limit, h, s);
    d.x16 = h;
  } else if (down_f) {
    auto* hf = reinterpret_cast<float*>(h);
    const int64_t total = n_slots * ldh;
    moe_act_f_kernel<<<grid_stride_blocks(total, 256), 256, 0, s>>>(g, u, F, ldh, total, clamped, w.alpha, w.limit,
                                                                    hf);
    POLYKV_CUDA_LAUNCHED();
    d.xf = hf;
    d.ldx = ldh;
  } else {
    auto* hq = reinterpret_cast<int8_t*>(h);
    auto* hs = reinterpret_cast<hd::ActScale*>(h + round_up(size_t(n_slots) * size_t(F), 256));
    const int64_t n_blocks = n_slots * (F / hd::kActBlock);
    moe_act_q_kernel<<<unsigned((n_blocks + kWarps - 1) / kWarps), kThreads, 0, s>>>(g, u, n_blocks, clamped,
                                                                                       w.alpha, w.limit, hq, hs);
    POLYKV_CUDA_LAUNCHED();
    d.xq = hq;
    d.xs = hs;
  }
  // 5. down
  if (mma)
    launch_moe_split_mma(ds, d, max_items, s);
  else
    by_width(width, [&](auto nc) { launch_any<decltype(nc)::value>(ds, d, grid_items, s); });
  // 6. the slot sum
  const int64_t total = int64_t(n) * E;
  moe_slot_sum_kernel<<<grid_stride_blocks(total, 256), 256, 0, s>>>(y, ids, weights, n, k, ne, E, out);
  POLYKV_CUDA_LAUNCHED();
}

}  // namespace

}  // namespace polykv::cuda
