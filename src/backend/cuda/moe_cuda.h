// Mixture-of-experts ops on the GPU (backend/backend.h moe_route / moe_experts / add_sigmoid_gated;
// the CPU reference is backend/cpu/moe_cpu.h). Host-clean: cuda_backend.cpp and the tests include it.
//
// moe_experts never copies anything to the host (no sync: decode steps stay in CUDA graphs):
//   1. group (one block): counts of the step's (token, slot) pairs per expert, a permutation of the
//      slots grouped by expert, and work items (expert, up to C pairs), all in device memory;
//   2. x's activations prepared once (8-bit blocks, or padded f32 for float experts), as matmul does;
//   3. gate and up of every item: a mat-vec kernel (grid: row blocks x items) that reads the item's
//      expert id on the device and its rows at base + e * expert_stride, for the item's columns
//      (gathered token rows), + expert biases -> g, u [slot][n_ff];
//   4. h = act(g, u) per slot (SwiGLU or gpt-oss's clamped form), written as the down mat-vec's
//      activations directly;
//   5. down of every item, + its bias -> y [slot][n_embd];
//   6. out[t] = Σ_j w[t][j] y[t k + j] in slot order.
// Decode and prefill run the same kernels (C = the kernel's column width, 8 for n >= 5): only the
// experts some row chose are read, each once per item (items of one expert hold C pairs each).
// v2 (the default; POLYKV_CUDA_MOE_KERNEL=v1 for the old kernels): q4_0 / q8_0 / q4_K / q5_K / q6_K experts are stored in
// the split layout and steps 3 and 5 run moe_cuda_v2.cu's kernels: the split mat-vec (16-byte
// streaming loads, 4 rows per warp; the v1 bits), or, from ~2 tokens per expert on (moe_uses_mma),
// tensor cores on items of up to 64 columns (x and h in f16; other bits, invariant within the path).
// Invariance: a (row, column) dot is the mat-vec kernels' fixed sequence (matmul_cuda_dot.cuh) for any
// column width or grouping, and the slot sum has a fixed order, so a token's output is the same bits
// whatever else is in the step; and the same bits as cuda::matvec on that expert's rows.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/cuda/cuda_context.h"
#include "backend/moe.h"

namespace polykv::cuda {

// Routing of n rows (backend.h moe_route): one warp per row; r.n_used <= 32.
void moe_route(const float* logits, int n, const MoeRouting& r, int32_t* ids, float* weights, CudaContext& ctx);

// x[r][c] += sigmoid(g[r]) * y[r][c].
void add_sigmoid_gated(float* x, const float* y, const float* g, int rows, int cols, cudaStream_t s);

// The n_expert slices of one expert tensor as moe_experts reads them: expert e's rows at
// base + e * expert_stride (ggml rows, WeightLayout::Rows), each row_stride bytes apart.
struct ExpertStack {
  DType type = DType::F32;
  int64_t n_in = 0, n_out = 0;
  size_t row_stride = 0, expert_stride = 0;
  const uint8_t* base = nullptr;
  int n_expert = 0;
  WeightLayout layout = WeightLayout::Rows;  // Rows (v1 kernels) or CudaSplit (v2 kernels)
};
// Throws Error unless the slices are such a stack of a type the kernels take (upload_expert_stack's
// layout).
ExpertStack expert_stack(const std::vector<WeightMatrix>& experts);
// Byte distance between experts in an uploaded stack (a multiple of 16) and the slack after the last.
size_t expert_stack_stride(const WeightMatrix& host);
constexpr size_t kExpertStackSlack = 16;

// Which expert kernels run (POLYKV_CUDA_MOE_KERNEL=v1|v2, default v2, read once; set_moe_kernel overrides it
// for tests and benchmarks). The choice is made at upload: with v2, upload_experts repacks q4_0,
// q8_0, q4_K and q6_K experts into the split layout (matmul_cuda_split.cuh) and moe_experts runs
// the v2 kernels on them (moe_cuda_v2.cu); other types (mxfp4, floats) keep the ggml rows and the
// v1 kernels whatever the switch. v1: every type in ggml rows (the kernels before 2026-12-01e).
int moe_kernel_version();
void set_moe_kernel(int version);  // 1 or 2; 0: back to the environment's choice
// The one-token FFN in two fused launches (moe_cuda_decode.cu; the same bits as the five kernels of the
// direct v2 path), on unless POLYKV_CUDA_MOE_FUSED=0. Tests: 1 on, 0 off, -1 back to the environment's choice.
bool moe_decode_fused();
void set_moe_decode_fused(int on);
// Whether the fused path routes inside its gate+up launch: only when that launch runs in one wave
// (moe_cuda_internal.h, moe_decode_route_fits); else the routing kernel runs first. The same bits either way.
// Tests: 1 always, 0 never, -1 back to the rule.
void set_moe_route_in_launch(int on);
// The routing's picks by ranks across a block (one barrier) instead of k rounds of warp shuffles, wherever the row's
// logits fit a block (n_expert <= 256): the same picks and weights. POLYKV_CUDA_MOE_RANK_ROUTE=0 off. Tests: 1 on,
// 0 off, -1 back to the environment's choice.
void set_moe_rank_route(int on);
// Whether upload_experts stores host (ggml rows) in the split layout under the current switch.
bool moe_split_upload(const WeightMatrix& host);
// Bytes between experts of a split stack of host's shape (a multiple of 16).
size_t expert_split_stride(const WeightMatrix& host);

// Whether a step of n rows, k experts per token, over n_expert split-layout experts runs on the
// tensor-core path (v2): n * k >= POLYKV_CUDA_MOE_MMA_MIN_SLOTS_PER_EXPERT (default 2) * n_expert,
// i.e. at least ~2 tokens per expert on average (H200, qwen3-30b-a3b q4_0: tensor cores 138 us per
// layer at n = 8 against 220-249 for the mat-vecs, 275 against 551-614 at n = 64). Depends on n,
// never on the routing, so the bits of a row are the same in every step of the same path (not
// across the two paths: 8-bit activations vs f16, like the dense mmq boundary,
// docs/CUDA_MMQ.md).
bool moe_uses_mma(int n, int k, int n_expert);
// Tests and benchmarks: the threshold in slots per expert; 0: back to the environment's choice;
// kMoeMmaAlways: every step of split-layout experts; kMoeMmaNever: none.
constexpr int kMoeMmaAlways = -1, kMoeMmaNever = 1 << 30;
void set_moe_mma_min(int slots_per_expert);

// x's 8-bit activation blocks, already written by the op before (the norm that wrote x: ops_cuda_acts.h,
// quantize_act_block_warp's bits): qs [n][n_embd], scales [n][n_embd / 32] of hd::ActScale. The fused
// one-token path's gate+up launch then copies them instead of quantizing x in each of its blocks (the same
// bytes, so the same bits). POLYKV_CUDA_MOE_XACTS=0 or set_moe_x_acts(0): ignored (x quantized in the launch).
struct MoeXActs {
  const int8_t* qs = nullptr;
  const void* scales = nullptr;
};
void set_moe_x_acts(int on);  // 1 on, 0 off, -1 back to the environment's choice
// How many fused gate+up launches took x's activations from a MoeXActs (tests: the path ran).
int64_t moe_x_acts_taken();
// The fused path's down launch: a register cap that keeps its grid in one wave where the compiler's choice would
// not (POLYKV_CUDA_MOE_DOWN_WAVE=0 off). The same bits either way. Tests: 1 always, 0 never, -1 back to the rule.
void set_moe_down_cap(int on);

// backend.h moe_route_experts: moe_route then moe_experts, except that a one-token step on the fused path
// (moe_decode_fused) routes inside its gate+up launch; the same ids, weights and out bits either way.
void moe_route_experts(const MoeExperts& w, const float* x, const float* logits, const MoeRouting& r, int n,
                       int32_t* ids, float* weights, float* out, CudaContext& ctx, const MoeXActs* xa = nullptr);
// backend.h moe_experts: x, out device [n][w.n_embd] (out may alias x), ids / weights device [n][k].
// An expert index outside [0, n_expert) makes that token's row NaN.
void moe_experts(const MoeExperts& w, const float* x, const int32_t* ids, const float* weights, int n, int k,
                 float* out, CudaContext& ctx, const MoeXActs* xa = nullptr);

}  // namespace polykv::cuda
