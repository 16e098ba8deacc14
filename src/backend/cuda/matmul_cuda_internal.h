// Internal to the CUDA matmul (matmul_cuda.cu: mat-vec kernels and activations; matmul_cuda_prefill.cu:
// the tensor-core path and dequantization). Not a public interface.
#pragma once
#include <cstdint>
#include <span>
#include <type_traits>

#include "backend/cpu/matmul.h"
#include "backend/cuda/cuda_context.h"
#include "backend/cuda/matmul_cuda.h"
#include "backend/cuda/matmul_cuda_dot.cuh"
#include "backend/cuda/ops_cuda_acts.h"
#include "core/layer_kinds.h"

namespace polykv::cuda {

// Throws Error unless w is a matrix these kernels take (type, shape, alignment of the rows).
void validate_device_weights(const WeightMatrix& w);

// Activations of n columns in the form the mat-vec kernels of w's type read, in ctx's MatmulActs
// scratch: quantized weights: qs [n][n_in] int8 + s [n][n_in / 32]; float weights: xf [n][ldx] f32,
// zero-padded to ldx = n_in rounded up to 8.
// dn: a norm deferred into this mat-vec (ops_cuda_acts.h; only the split kernels take one: launch_matvec
// refuses it elsewhere), for the view's column 0.
struct ActView {
  const int8_t* qs = nullptr;
  const hd::ActScale* s = nullptr;
  const float* xf = nullptr;
  int64_t ldx = 0;
  DeferredNorm dn;
};
ActView prepare_acts(const WeightMatrix& w, const float* x, int n, CudaContext& ctx);

// Which activation kernels let the mat-vec after them launch before their own PDL wait, not only after it:
// its blocks then become resident and issue their first weight loads while the kernel before the activation
// kernel drains (a short activation kernel otherwise leaves the mat-vec's start-up exposed: docs/CUDA_DECODE.md,
// "Deferred norms"). Safe because every kernel still waits before it exits (a grid never completes before the
// one before it) and the mat-vecs read only weights before their wait. Level 1 (the default): rmsnorm_defer
// only, 1.02-1.04x decode on the H200; POLYKV_CUDA_EARLY_ALLOW=all (2): also gated_activation_acts and
// prepare_acts' quantization, which measured slower than 1 (0.98x dense q8_0/turbo3t: the o and down
// mat-vecs' blocks then sit on the multiprocessors the attention and the FFN need; call V6); =0: none.
int early_allow();

// y[col0 + c][o] for c < ncols (1..8) and every row o; y: [*][w.n_out]. On ctx's stream, with PDL
// (matvec_pdl): the kernel may read w before the kernel before it on the stream has completed, so
// that kernel must not write w (prepare_acts' kernels and other mat-vecs do not).
void launch_matvec(const WeightMatrix& w, const ActView& a, int col0, int ncols, float* y, CudaContext& ctx);

// Whether the stream kernel takes these parts in one launch: 1..kMaxMatvecParts matrices of one type,
// n_in and row stride, each non-empty with 16-byte aligned rows (or, for weights in the split layout,
// whether the split kernel takes them: every part split, one type, n_in and stride).
bool parts_stream_together(std::span<const MatvecPart> parts);
// One stream-kernel launch over every part's rows (bit-identical to one launch per part); returns
// false (nothing launched) unless parts_stream_together(parts).
bool launch_matvec_stream_parts(std::span<const MatvecPart> parts, const ActView& a, int col0, int ncols,
                                CudaContext& ctx);

// The stream kernel (matmul_cuda_stream.cu), for rows whose start and stride are 16-byte aligned:
// launches and returns true, or returns false (nothing launched) for other rows.
bool launch_matvec_stream(const WeightMatrix& w, const ActView& a, int col0, int ncols, float* y, CudaContext& ctx);
// Whether w's rows start and stride on 16 bytes (the stream kernel's and the small float kernel's rows).
bool stream_rows(const WeightMatrix& w);

// The small float mat-vec (matmul_cuda_small.cu): one column of f32 / f16 / bf16 weights of at most 1024
// rows of at most 4096 values, each row in one warp's registers, loaded before the PDL wait (a MoE router:
// latency, not bytes). The same bits as the stream kernel. Launches and returns true, or returns false
// (nothing launched) where it does not take the call. POLYKV_CUDA_MATVEC_REGS=0 or set_matvec_float_regs(false):
// the stream kernel instead (A/B; tests). Declared for tests in matmul_cuda.h too.
bool launch_matvec_float_regs(const WeightMatrix& w, const ActView& a, int col0, int ncols, float* y,
                              CudaContext& ctx);
bool matvec_float_regs_takes(const WeightMatrix& w, int ncols);
void set_matvec_float_regs(bool on);

// How the stream kernel runs for w and ncols columns (all 0 when the rows are not 16-byte aligned):
// rows per warp, warps per block, ring depth, blocks per SM (occupancy), grid, shared memory bytes.
struct StreamPlan {
  int rows_per_warp = 0, warps_per_block = 0, depth = 0, blocks_per_sm = 0, grid = 0;
  size_t smem = 0;
};
StreamPlan stream_plan(const WeightMatrix& w, int ncols, CudaContext& ctx);

// Tests and benchmarks (not thread-safe; set while no matmul runs): force the stream kernel's rows
// per warp (1; > 1: the type's widest; 0: automatic), or turn programmatic dependent launch off.
// Results do not depend on either.
void set_matvec_rows_per_warp(int r);
void set_matvec_pdl(bool on);
// Whether the mat-vec kernels and their activation kernels launch with PDL (sm_90 and on).
bool matvec_pdl(const CudaContext& ctx);

// Tests only: the bound of the tensor-core path's dequantized tile (0: the default, 64 MiB), so that
// small matrices run in several tiles. Not thread-safe; set it while no matmul runs.
void set_prefill_tile_bytes(size_t bytes);
// Rows [row0, row0 + rows) of quantized w (either layout) to f16 as the tensor-core path's tiles (dst: device
// __half [rows][w.n_in]), for tests and benchmarks.
void dequantize_tile(const WeightMatrix& w, int64_t row0, int64_t rows, void* dst, cudaStream_t s);
// The ggml rows' tile kernel: staged in shared memory (the default, as for the split layout) or not
// (POLYKV_CUDA_DEQUANT_ROWS=old). The same bits (MatmulCuda.DequantTileRowsStagedSameBits).
void set_rows_dequant_staged(bool on);

// The mmq path in two steps (matmul_parts converts x once per weight type): x [n][n_in] f32 to f16 in
// ctx's MatmulActs scratch, in the order w's kernel reads (mma.sync: [n][n_in]; wgmma: permuted for w's
// type), then y = w . x for mmq_supports(w) (K-split partials in the MatmulWeights scratch).
struct MmqActs {
  const void* x16 = nullptr;
  int64_t n_in = 0;
  int n = 0;
  int order = -1;  // -1: [n][n_in]; else the DType whose permutation it is (wgmma)
};
MmqActs mmq_prepare_acts(const WeightMatrix& w, const float* x, int n, CudaContext& ctx);
// Whether acts is what w's kernel reads (so matmul_parts can skip a conversion).
bool mmq_acts_fit(const MmqActs& acts, const WeightMatrix& w, int n, const CudaContext& ctx);
void mmq_launch(const WeightMatrix& w, const MmqActs& acts, float* y, int n, CudaContext& ctx);
// matmul_parts' mmq path in one launch of the wgmma kernel when every part takes it with one type, n_in
// and row stride (each part's results are mmq_launch's bit for bit); false (nothing done) otherwise, and
// with POLYKV_CUDA_MMQ_FUSE=0 (one launch per part, for A/B).
bool mmq_launch_fused(std::span<const MatvecPart> parts, const float* x, int n, CudaContext& ctx);
// x [n][n_in] f32 to f16 [n][n_in] in the MatmulActs scratch (the MoE experts' mma.sync kernel reads it).
const void* mmq_prepare_x(const float* x, int64_t n_in, int n, CudaContext& ctx);
// The wgmma kernel (matmul_cuda_mmq3_sm90a.cu, docs/CUDA_MMQ.md "wgmma"): on by default where it exists
// (builds for sm_90 compile it for sm_90a; devices of compute capability 9.0); POLYKV_CUDA_MMQ_WGMMA=0 or
// set_mmq_wgmma(false) runs the mma.sync kernel instead. The same contract (batch invariance included);
// on the H200 also the same bits as the mma.sync kernel in every case tested (MmqCuda.WgmmaAgainstMmaSync,
// call W1), which PTX does not promise. Tests and benchmarks: not thread-safe.
void set_mmq_wgmma(bool on);
// Whether matmul() / matmul_parts() take the wgmma kernel for w on ctx's device (when they take mmq).
bool mmq_wgmma_takes(const WeightMatrix& w, const CudaContext& ctx);

// True for f32 / f16 / bf16 weights.
bool is_float_weight(DType t);

// ---- weights in the split layout (matmul_cuda_split.cu) ----
// Throws Error unless w (layout CudaSplit) is a matrix the split kernels take.
void validate_split_weights(const WeightMatrix& w);
// One launch of the split mat-vec kernel over every part's rows (1..8 columns); returns false
// (nothing launched) unless every part is in the split layout with one type, n_in and stride.
bool launch_matvec_split_parts(std::span<const MatvecPart> parts, const ActView& a, int col0, int ncols,
                               CudaContext& ctx);
// The epilogue of a q, k, v mat-vec (one column): the biases of q, k and v added (when not null), then RoPE of q and
// k, the first two parts: pair i < n_rot / 2 of every head at angle (pos[0] / scale) * inv_freq[i], its dims
// (2i, 2i + 1) in Norm style, (i, i + n_rot / 2) in Neox style (ops_cuda_math.cuh's rope_pair).
struct SplitRope {
  const int32_t* pos = nullptr;       // device [1]
  const float* inv_freq = nullptr;    // device [n_rot / 2]
  float scale = 1;
  int head_dim = 2, n_rot = 0;
  RopeStyle style = RopeStyle::Norm;
  const float* bias[3] = {nullptr, nullptr, nullptr};  // device [rows of q], [of k], [of v], or all null
};
// One launch of q = parts[0], k = parts[1], v = parts[2] for one column with the epilogue of `rope` (biases, then q
// and k rotated): the bits of launch_matvec_split_parts, then add_bias, then rope_qk. Returns false (nothing launched) unless the
// three parts are split with one n_in, q and k with one type and stride, v with theirs or in a pair that has a
// two-type kernel (q4_K or q5_K q and k with q6_K v, q4_K with q5_K v: K-quant mixes, quant/weight_mix.h),
// head_dim and n_rot even, n_rot <= head_dim, and q's and k's rows whole heads.
bool matvec_split_rope_ok(std::span<const MatvecPart> qkv, int head_dim, int n_rot);
// One column of split parts of two types, the first m of one type and stride, the rest of another, in one launch when
// the pair has a two-type kernel (the rope pairs above; POLYKV_CUDA_ROPE2=0: never): the bits of one launch per part.
// Returns false (nothing launched) otherwise.
bool launch_matvec_split_parts2(std::span<const MatvecPart> parts, const ActView& av, int ncols, CudaContext& ctx);
// m when parts [0, m) share one type and stride and [m, n) another (all split, one n_in, 0 < m < n) and the pair has
// a two-type kernel: what launch_matvec_split_parts2 and the two-type q,k,v + RoPE launch (m == 2) take; else 0.
size_t split_two_type_prefix(std::span<const MatvecPart> parts);
bool launch_matvec_split_rope(std::span<const MatvecPart> qkv, const ActView& a, const SplitRope& rope,
                              CudaContext& ctx);
// Rows [row0, row0 + rows) of split w to f16 (dst: device __half [rows][w.n_in]).
void dequantize_split_tile_f16(const WeightMatrix& w, int64_t row0, int64_t rows, void* dst, cudaStream_t s);
// Its two kernels, the same bits: Staged (the default) stages a thread block's units in shared memory and
// writes them as contiguous vectors; Old (POLYKV_CUDA_DEQUANT=old, read once) has each thread write its own
// unit's runs. set_split_dequant (tests, benchmarks) overrides the environment.
enum class SplitDequant { Old, Staged };
void set_split_dequant(SplitDequant v);
// dequantize_rows() for split w.
void dequantize_split_rows(const WeightMatrix& w, const int32_t* rows, int n, float scale, float* dst,
                           cudaStream_t s);

// The narrowest kernel width that holds ncols columns (its extra columns repeat the last one and are
// not stored; the width does not change any result).
template <class Fn>
void by_width_split(int ncols, Fn&& fn) {
  if (ncols == 1) fn(std::integral_constant<int, 1>{});
  else if (ncols == 2) fn(std::integral_constant<int, 2>{});
  else if (ncols <= 4) fn(std::integral_constant<int, 4>{});
  else fn(std::integral_constant<int, 8>{});
}

}  // namespace polykv::cuda
