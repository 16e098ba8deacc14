// The one-token MoE FFN in two launches (moe_cuda_internal.h, launch_moe_decode_fused): what the v2
// direct path (moe_cuda.cu: n = 1, every stack split) does in five kernels after the routing
// (quantize x, gate+up mat-vec, activation + its quantization, down mat-vec, slot sum), with the
// same operations on the same values, so the same bits:
//
//   moe_gate_up_act_kernel  grid (n_ff / 32 row blocks, k slots), 8 warps. The block quantizes x into
//                           shared memory (quantize_acts_kernel's blocks), each warp computes 4 rows of
//                           gate AND up of the slot's expert (moe_split_matvec_kernel's units, per-lane
//                           order and butterfly), the block's 32 activations act(g + bg, u + bu) go
//                           through shared memory to warp 0, which writes them as the down mat-vec's
//                           8-bit block (moe_act_q_kernel's quantization).
//   moe_down_sum_kernel     grid (n_embd / 4 row groups), one warp per slot: warp j computes 4 rows of
//                           down for slot j (moe_split_matvec_kernel's arithmetic, + bias), then 4
//                           threads add the slots in slot order (moe_slot_sum_kernel's steps) into out.
//
// With a.logits (moe_route_experts), every gate+up block also routes the token, by ranks across the block
// (route_block_picks; route_row_warp's rounds in warp 0 with POLYKV_CUDA_MOE_RANK_ROUTE=0 or a NaN logit: the same
// picks) and block (0, 0) stores the picks and their weights, so no routing kernel runs before.
// Both launch with programmatic dependent launch (sm_90) and wait for the kernel before them before
// reading anything. An expert id outside [0, n_expert) makes the token's row NaN, as the slot sum does.
#include <cuda_runtime.h>

#include "backend/cuda/matmul_cuda_acts.cuh"
#include "backend/cuda/matmul_cuda_internal.h"
#include "backend/cuda/matmul_cuda_launch.cuh"
#include "backend/cuda/moe_cuda_internal.h"
#include "backend/cuda/moe_cuda_v2.cuh"
#include "core/error.h"

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

namespace polykv::cuda {
namespace {

constexpr int kGuWarps = 8;                   // warps of a gate+up block
constexpr int kGuRows = 4;                    // rows of gate (and of up) per warp
constexpr int kGuBlockRows = kGuWarps * kGuRows;  // 32: one activation block of the down mat-vec's input
static_assert(kGuBlockRows == hd::kActBlock, "a gate+up block writes one 8-bit activation block per slot");
constexpr int kDownRows = 4;                  // rows of down per warp (and per block)

// Dynamic shared memory: x's 8-bit activations [n_embd] (16-byte aligned), their scales [n_embd / 32].
template <class T>
__global__ void __launch_bounds__(32 * kGuWarps) moe_gate_up_act_kernel(const MoeDecodeArgs a, hd::SplitGeom geom) {
  using S = hd::Split<T>;
  constexpr int R2 = 2 * kGuRows;  // gate rows 0..3, up rows 4..7
  constexpr int QW = S::kUnitWords, HW = S::kHeadWords;
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ float h_s[kGuBlockRows];
  __shared__ int e_s;
  __shared__ float l_s[32 * kGuWarps];  // the router's logits (by_rank)
  __shared__ int pick_s[kMoeDecodeMaxSlots];
  __shared__ float pickv_s[kMoeDecodeMaxSlots];
  wait_for_previous_grid();
  allow_next_grid();
  const int slot = int(blockIdx.y);
  const int lane = int(threadIdx.x % 32), warp = int(threadIdx.x / 32);
  auto* xq = reinterpret_cast<int8_t*>(smem);
  auto* xs = reinterpret_cast<hd::ActScale*>(smem + ((a.n_embd + 15) / 16) * 16);
  // x's activations written by the op before (a.xq_in): their loads go out before the routing and land in
  // shared memory before the block's first barrier. Thread t copies 16-byte word t, t + 256, ... of the
  // quants and scale t, t + 256, ... (kXCopy of each at most: n_embd <= kXCopy * 256 * 16).
  constexpr int kXCopy = 2;
  static_assert(int64_t(kXCopy) * 32 * kGuWarps * 16 == kMoeXActsMaxEmbd, "the copy covers the widest x taken");
  const int nq16 = int(a.n_embd / 16), nb = int(a.n_embd / hd::kActBlock);
  uint4 xw[kXCopy];
  float4 sw[kXCopy];
  if (a.xq_in) {
#pragma unroll
    for (int c = 0; c < kXCopy; ++c) {
      const int i = int(threadIdx.x) + c * 32 * kGuWarps;
      if (i < nq16) xw[c] = reinterpret_cast<const uint4*>(a.xq_in)[i];
      if (i < nb) sw[c] = reinterpret_cast<const float4*>(a.xs_in)[i];
    }
  }
  // The routing, in every block; block (0, 0) stores the picks. By ranks (a.rank_route: every thread counts a
  // share of one expert's rank, one barrier), else by warp 0 alone (moe_route_kernel's warp: k rounds of
  // shuffles, a few microseconds during which the other warps wait).
  const bool by_rank = a.logits && a.rank_route && a.n_expert <= 32 * kGuWarps;
  // Warp 0's rounds over logits l: the slot's expert into e_s; block (0, 0) stores the picks and weights.
  const auto rounds = [&](const float* l) {
    if (warp != 0) return;
    int i;
    float w;
    route_row_warp(l, a.n_expert, a.k, a.all_softmax, lane, i, w);
    if (lane == slot) e_s = i;
    if (blockIdx.x == 0 && blockIdx.y == 0 && lane < a.k) {
      a.ids_out[lane] = i;
      a.weights_out[lane] = w;
    }
  };
  if (by_rank) {
    if (threadIdx.x < unsigned(a.n_expert)) l_s[threadIdx.x] = a.logits[threadIdx.x];
  } else if (a.logits) {
    rounds(a.logits);
  } else if (threadIdx.x == 0) {
    e_s = a.ids[slot];
  }
  if (a.xq_in) {
#pragma unroll
    for (int c = 0; c < kXCopy; ++c) {
      const int i = int(threadIdx.x) + c * 32 * kGuWarps;
      if (i < nq16) reinterpret_cast<uint4*>(xq)[i] = xw[c];
      if (i < nb) reinterpret_cast<float4*>(xs)[i] = sw[c];
    }
  }
  __syncthreads();
  int e;
  if (!by_rank) {
    e = e_s;
  } else if (!route_block_picks<32 * kGuWarps>(l_s, a.n_expert, a.k, pick_s, pickv_s)) {
    e = pick_s[slot];
    if (blockIdx.x == 0 && blockIdx.y == 0 && warp == 0) {
      const float w = route_weight_warp(l_s, a.n_expert, a.k, a.all_softmax, lane, lane < a.k ? pickv_s[lane] : 0.0f);
      if (lane < a.k) {
        a.ids_out[lane] = pick_s[lane];
        a.weights_out[lane] = w;
      }
    }
  } else {  // a NaN logit: route_row_warp's rounds decide (the order is not total)
    rounds(l_s);
    __syncthreads();
    e = e_s;
  }
  if (e < 0 || e >= a.n_expert) return;  // the whole block; the down kernel makes the row NaN
  const int64_t F = a.n_ff;
  const int64_t row0 = int64_t(blockIdx.x) * kGuBlockRows + warp * kGuRows;  // < F (F % 32 == 0)
  const uint8_t* rows[R2];
#pragma unroll
  for (int r = 0; r < kGuRows; ++r) {
    rows[r] = a.gate + size_t(e) * a.gu_expert_stride + size_t(row0 + r) * a.gu_row_stride;
    rows[kGuRows + r] = a.up + size_t(e) * a.gu_expert_stride + size_t(row0 + r) * a.gu_row_stride;
  }
  const int64_t n_units = geom.n_units;
  // The weights of the lane's first unit are in flight while the block quantizes x.
  uint32_t q[R2][QW], h[R2][HW];
  if (lane < n_units) {
#pragma unroll
    for (int r = 0; r < R2; ++r) hd::split_load_unit<T>(rows[r], geom, lane, q[r], h[r]);
  }
  if (!a.xq_in) {  // x's activation blocks w, w + 8, ...: four chains side by side a warp (quantize_acts_kernel's)
    for (int b0 = warp; b0 < nb; b0 += 4 * kGuWarps) {
      float v[4];
      int valid = 0;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int b = b0 + j * kGuWarps;
        v[j] = b < nb ? a.x[int64_t(b) * hd::kActBlock + lane] : 0.0f;
        valid += b < nb ? 1 : 0;
      }
      quantize_act_blocks_warp<4>(v, valid, lane, xq + b0 * hd::kActBlock, xs + b0, kGuWarps);
    }
    __syncthreads();
  }
  const int64_t arow[1] = {0};
  float acc[R2][1] = {};
  for (int64_t u = lane; u < n_units; u += 32) {  // moe_split_matvec_kernel's units in its order
    uint32_t qn[R2][QW], hn[R2][HW];  // the next unit's, in flight during this one's dots
    const int64_t un = u + 32;
    if (un < n_units) {
#pragma unroll
      for (int r = 0; r < R2; ++r) hd::split_load_unit<T>(rows[r], geom, un, qn[r], hn[r]);
    }
    hd::moe_split_unit<T, 1, R2>(q, h, u, xq, xs, a.n_embd, arow, acc);
#pragma unroll
    for (int r = 0; r < R2; ++r) {
#pragma unroll
      for (int i = 0; i < QW; ++i) q[r][i] = qn[r][i];
#pragma unroll
      for (int i = 0; i < HW; ++i) h[r][i] = hn[r][i];
    }
  }
#pragma unroll
  for (int r = 0; r < kGuRows; ++r) {
    float g = moe_warp_sum(acc[r][0]), up = moe_warp_sum(acc[kGuRows + r][0]);
    if (a.gate_bias) g = hd::fadd(g, a.gate_bias[int64_t(e) * F + row0 + r]);
    if (a.up_bias) up = hd::fadd(up, a.up_bias[int64_t(e) * F + row0 + r]);
    if (lane == 0) h_s[warp * kGuRows + r] = hd::moe_act(g, up, a.clamped, a.alpha, a.limit);
  }
  __syncthreads();
  if (warp == 0) {
    const int64_t b = int64_t(slot) * (F / hd::kActBlock) + blockIdx.x;  // moe_act_q_kernel's block
    quantize_act_block_warp(h_s[lane], lane, a.hq + b * hd::kActBlock, a.hs + b);
  }
}

// Block: 32 * k threads (warp j = slot j), 4 rows of out. kMinBlocks 0 leaves the registers to the compiler; 2
// caps them at 64 (4 blocks of 8 warps on a multiprocessor), for grids that would not run in one wave with the
// compiler's choice (H33, H100: qwen3-30b-a3b's 512 blocks at 74 registers, 3 blocks a multiprocessor: 1.29 waves).
template <class T, int kMinBlocks>
__global__ void __launch_bounds__(32 * kMoeDecodeMaxSlots, kMinBlocks) moe_down_sum_kernel(const MoeDecodeArgs a,
                                                                                           hd::SplitGeom geom) {
  using Cfg = hd::MoeSplitCfg<T, 1>;
  static_assert(Cfg::kR == kDownRows, "the down warps take the v2 mat-vec's rows per warp");
  constexpr int R = kDownRows, U = Cfg::kU;
  __shared__ float y_s[kMoeDecodeMaxSlots][kDownRows];
  __shared__ int bad_s;
  wait_for_previous_grid();
  allow_next_grid();
  const int lane = int(threadIdx.x % 32), slot = int(threadIdx.x / 32);
  const int64_t E = a.n_embd;
  const int64_t row0 = int64_t(blockIdx.x) * R;
  const int nrows = int(E - row0 < R ? E - row0 : R);
  if (threadIdx.x == 0) bad_s = 0;
  __syncthreads();
  const int e = a.ids[slot];
  if (e < 0 || e >= a.n_expert) {
    if (lane == 0) atomicOr(&bad_s, 1);
  } else {
    const uint8_t* w = a.down + size_t(e) * a.down_expert_stride;
    const uint8_t* rows[R];
#pragma unroll
    for (int r = 0; r < R; ++r) rows[r] = w + size_t(row0 + min(r, nrows - 1)) * a.down_row_stride;
    const int64_t arow[1] = {slot};
    float acc[R][1] = {};
    const int64_t n_units = geom.n_units, n_steps = (n_units + 31) / 32;
    for (int64_t j0 = 0; j0 < n_steps; j0 += U)  // moe_split_matvec_kernel's loop
      hd::moe_split_chunk<T, 1, R, U>(rows, geom, j0, lane, nrows, a.hq, a.hs, a.n_ff, arow, acc);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float v = moe_warp_sum(acc[r][0]);
      if (a.down_bias) v = hd::fadd(v, a.down_bias[int64_t(e) * E + row0 + min(r, nrows - 1)]);
      if (lane == r) y_s[slot][r] = v;
    }
  }
  __syncthreads();
  if (threadIdx.x < unsigned(nrows)) {
    const int r = int(threadIdx.x);
    float o = 0.0f;
    if (bad_s) {
      o = __int_as_float(0x7fc00000);
    } else {
      for (int j = 0; j < a.k; ++j) o = hd::slot_sum_step(o, a.weights[j], y_s[j][r], j);
    }
    a.out[row0 + r] = o;
  }
}

// Blocks of `threads` threads of kernel k resident on one multiprocessor of ctx's GPU with `smem` bytes of dynamic
// shared memory (cached per device, kernel and shape: the decode graph's capture and eager steps ask once a layer).
int resident_blocks(const void* kernel, int threads, size_t smem, CudaContext& ctx) {
  static std::mutex mu;
  static std::vector<std::array<int64_t, 5>> cache;  // device, kernel, threads, smem, blocks per SM
  const std::lock_guard<std::mutex> lock(mu);
  const auto kp = int64_t(reinterpret_cast<uintptr_t>(kernel));
  for (const auto& c : cache)
    if (c[0] == ctx.device() && c[1] == kp && c[2] == threads && c[3] == int64_t(smem)) return int(c[4]);
  int per_sm = 0;
  POLYKV_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem));
  cache.push_back({ctx.device(), kp, threads, int64_t(smem), per_sm});
  return per_sm;
}

// The gate+up launch's dynamic shared memory: x's 8-bit activations (16-byte aligned), then their scales.
size_t gate_up_smem(int64_t n_embd) {
  return size_t((n_embd + 15) / 16 * 16) + size_t(n_embd / hd::kActBlock) * sizeof(hd::ActScale);
}

// POLYKV_CUDA_MOE_FUSED: -1 not read yet, 0 off, 1 on, 2 noroute; set_moe_decode_fused overrides on / off.
int g_fused = -1;
int g_fused_forced = -1;
int g_route_fits_forced = -1;  // set_moe_route_in_launch
int g_x_acts_forced = -1;      // set_moe_x_acts
int g_down_cap_forced = -1;    // set_moe_down_cap
int g_rank_route_forced = -1;  // set_moe_rank_route
std::atomic<int64_t> g_x_acts_taken{0};

// A switch read from the environment: on unless NAME=0.
bool env_on(const char* name) {
  const char* e = std::getenv(name);
  return !(e != nullptr && std::strcmp(e, "0") == 0);
}

int fused_mode() {
  if (g_fused < 0) {
    const char* e = std::getenv("POLYKV_CUDA_MOE_FUSED");
    g_fused = !e ? 1 : std::strcmp(e, "0") == 0 ? 0 : std::strcmp(e, "noroute") == 0 ? 2 : 1;
  }
  return g_fused;
}

}  // namespace

bool moe_decode_fused() {
  if (g_fused_forced >= 0) return g_fused_forced != 0;
  return fused_mode() != 0;
}

bool moe_route_in_launch() { return fused_mode() != 2; }

void set_moe_decode_fused(int on) { g_fused_forced = on < 0 ? -1 : (on ? 1 : 0); }

void set_moe_route_in_launch(int on) { g_route_fits_forced = on < 0 ? -1 : (on ? 1 : 0); }

bool moe_x_acts_on() {
  if (g_x_acts_forced >= 0) return g_x_acts_forced != 0;
  static const bool on = env_on("POLYKV_CUDA_MOE_XACTS");
  return on;
}

void set_moe_x_acts(int on) { g_x_acts_forced = on < 0 ? -1 : (on ? 1 : 0); }

bool moe_rank_route_on() {
  if (g_rank_route_forced >= 0) return g_rank_route_forced != 0;
  static const bool on = env_on("POLYKV_CUDA_MOE_RANK_ROUTE");
  return on;
}

void set_moe_rank_route(int on) { g_rank_route_forced = on < 0 ? -1 : (on ? 1 : 0); }

void set_moe_down_cap(int on) { g_down_cap_forced = on < 0 ? -1 : (on ? 1 : 0); }

void note_moe_x_acts_taken() { g_x_acts_taken.fetch_add(1, std::memory_order_relaxed); }

int64_t moe_x_acts_taken() { return g_x_acts_taken.load(std::memory_order_relaxed); }

bool moe_decode_fused_takes(const ExpertStack& gs, const ExpertStack& us, const ExpertStack& ds, int k) {
  bool types = false;
  hd::visit_split_decoder(gs.type, [&](auto) { types = true; });
  bool down = false;
  hd::visit_split_decoder(ds.type, [&](auto) { down = true; });
  return types && down && gs.layout == WeightLayout::CudaSplit && us.layout == WeightLayout::CudaSplit &&
         ds.layout == WeightLayout::CudaSplit && gs.type == us.type && gs.row_stride == us.row_stride &&
         gs.expert_stride == us.expert_stride && gs.n_out % kGuBlockRows == 0 && gs.n_in % hd::kActBlock == 0 &&
         k >= 1 && k <= kMoeDecodeMaxSlots;
}

bool moe_decode_route_fits(const ExpertStack& gs, int k, CudaContext& ctx) {
  if (g_route_fits_forced >= 0) return g_route_fits_forced != 0;
  // POLYKV_CUDA_MOE_ONE_WAVE=0: always route inside the launch (the rule off, for A/B).
  static const bool rule = env_on("POLYKV_CUDA_MOE_ONE_WAVE");
  if (!rule) return true;
  const int64_t blocks = gs.n_out / kGuBlockRows * k;
  const size_t smem = gate_up_smem(gs.n_in);
  int per_sm = 0;
  hd::visit_split_decoder(gs.type, [&](auto dec) {
    using T = decltype(dec);
    per_sm = resident_blocks(reinterpret_cast<const void*>(moe_gate_up_act_kernel<T>), 32 * kGuWarps, smem, ctx);
  });
  return blocks <= int64_t(per_sm) * ctx.sm_count();
}

void launch_moe_decode_fused(const ExpertStack& gs, const ExpertStack& us, const ExpertStack& ds, MoeDecodeArgs a,
                             CudaContext& ctx) {
  check(moe_decode_fused_takes(gs, us, ds, a.k), "CUDA moe_experts: the fused one-token path does not take these experts");
  a.gate = gs.base;
  a.up = us.base;
  a.down = ds.base;
  a.gu_expert_stride = gs.expert_stride;
  a.gu_row_stride = gs.row_stride;
  a.down_expert_stride = ds.expert_stride;
  a.down_row_stride = ds.row_stride;
  a.n_embd = gs.n_in;
  a.n_ff = gs.n_out;
  a.rank_route = moe_rank_route_on();
  if (a.logits) {  // the down kernel reads the picks the gate+up launch stores
    a.ids = a.ids_out;
    a.weights = a.weights_out;
  }
  const bool pdl = matvec_pdl(ctx);
  const cudaStream_t s = ctx.stream();
  hd::visit_split_decoder(gs.type, [&](auto dec) {
    using T = decltype(dec);
    const size_t smem = gate_up_smem(a.n_embd);
    const dim3 grid(unsigned(a.n_ff / kGuBlockRows), unsigned(a.k));
    launch_kernel(moe_gate_up_act_kernel<T>, grid, dim3(32 * kGuWarps), smem, s, pdl, a, hd::split_geom<T>(a.n_embd));
  });
  hd::visit_split_decoder(ds.type, [&](auto dec) {
    using T = decltype(dec);
    const int64_t blocks = (a.n_embd + kDownRows - 1) / kDownRows;
    // The register cap where the compiler's choice would leave blocks for a second wave
    // (POLYKV_CUDA_MOE_DOWN_WAVE=0: never; set_moe_down_cap forces either).
    static const bool rule = env_on("POLYKV_CUDA_MOE_DOWN_WAVE");
    bool cap = g_down_cap_forced >= 0 ? g_down_cap_forced != 0 : false;
    if (g_down_cap_forced < 0 && rule) {
      const int per_sm = resident_blocks(reinterpret_cast<const void*>(moe_down_sum_kernel<T, 0>), 32 * a.k, 0, ctx);
      cap = blocks > int64_t(per_sm) * ctx.sm_count();
    }
    const dim3 grid{unsigned(blocks)};
    if (cap)
      launch_kernel(moe_down_sum_kernel<T, 2>, grid, dim3(32 * a.k), 0, s, pdl, a, hd::split_geom<T>(a.n_ff));
    else
      launch_kernel(moe_down_sum_kernel<T, 0>, grid, dim3(32 * a.k), 0, s, pdl, a, hd::split_geom<T>(a.n_ff));
  });
  POLYKV_CUDA_LAUNCHED();
}

}  // namespace polykv::cuda
