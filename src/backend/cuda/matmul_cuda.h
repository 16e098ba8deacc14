// Matrix multiplication on the GPU with weights in their stored GGUF/ggml type (device copies of
// the rows, same layout and row_stride as on the host).
//   y[t][o] = sum_i W[o][i] * x[t][i];  W: [n_out][n_in], x: [n][n_in] f32, y: [n][n_out] f32.
// n <= 8: mat-vec kernels reading each weight byte once for all n columns (decode, speculative
// verification); split-layout weights and 9..128 columns: the quantized mat-mul on tensor cores (mmq
// below); other quantized weights and n <= 32: the mat-vec kernels, 8 columns per pass; larger n:
// prefill, through tensor cores (tiles of rows dequantized to f16 in ctx's scratch + cuBLAS, f32
// accumulation). Every weight type of core/dtype.h that the CPU backend's matmul takes is supported.
//
// Precision (against matmul_ref): quantized weights multiply 8-bit activations (x rounded per block
// of 32 to d * q, d = max|x| / 127, like the CPU backend; |Δy| <= Σ |w_i| amax_32(i) / 254, about
// 0.3 % relative on random data); float weights use x as it is (f32 accumulation). The tensor-core
// path rounds x and the weights to f16 (about 3e-4 relative), except f32 weights (f32 GEMM).
// Batch invariance: for n <= 8 (quantized weights: n <= 32) y[t][o] is bit-identical whatever the
// other columns are and however many there are (matmul_cuda_dot.cuh says why).
// Weights: rows 2-byte aligned (f32: 4-byte); w.data and row_stride 16-byte aligned give the fast
// path (matmul_cuda_stream.cu: a persistent grid streaming the rows through shared memory).
// On sm_90 the kernels launch with programmatic dependent launch: the mat-vec kernel starts while
// the activation kernel before it runs and fetches its first weights then (matmul_cuda_launch.cuh);
// nothing changes for callers (the activation kernel first waits for whatever came before it).
#pragma once
#include <cstdint>
#include <span>

#include "backend/cpu/matmul.h"
#include "backend/cuda/cuda_context.h"

namespace polykv::cuda {

// True if matmul() has kernels for weights of type t (the float types and the quantized types of
// matmul_cuda_decode.cuh). The backend refuses other types at upload. The ternary types (tq1_0, tq2_0,
// ptq1_0) have decoders since 2026-12-04 (CudaQuantDecode.* on the CPU, bit for bit against dequantize_row_ref),
// run on a GPU since 2026-12-05 (MatmulCuda.*, TernaryCuda.ModelLogitsMatchTheCpu; docs/TERNARY.md);
// POLYKV_CUDA_TERNARY=0 refuses them.
bool has_weight_kernels(DType t);
// Tests: ternary weights taken or refused for the rest of the process (overrides POLYKV_CUDA_TERNARY).
void set_ternary_weights_enabled(bool on);

// w.data: device pointer. x, y: device pointers.
void matmul(const WeightMatrix& w, const float* x, float* y, int n, CudaContext& ctx);

// One matrix of a product over several matrices that read the same x (q, k, v; gate, up):
// y = w · x, y: device [n][w->n_out].
struct MatvecPart {
  const WeightMatrix* w;
  float* y;
};
constexpr int kMaxMatvecParts = 4;

// matmul(*p.w, x, p.y, n) for every part, bit for bit. When the parts share type, n_in and row stride
// (16-byte aligned rows) and n takes the mat-vec path, the activations are prepared once and one
// kernel launch computes every part's rows; otherwise the parts run one after the other.
void matmul_parts(std::span<const MatvecPart> parts, const float* x, int n, CudaContext& ctx);

// The mat-vec path alone (n in 1..8), for tests and benchmarks. Uses ctx's MatmulActs scratch (the
// activations quantized to 8 bits, or padded) and its stream.
void matvec(const WeightMatrix& w, const float* x, float* y, int n, CudaContext& ctx);

// Largest n that matmul() sends to the mat-vec kernels (8 columns per pass; quantized weights only
// beyond kMatvecMaxCols).
constexpr int kMatvecMaxCols = 8;
constexpr int kChunkedMatvecMaxCols = 32;

// The quantized mat-mul on tensor cores (matmul_cuda_mmq.cu, matmul_cuda_mmq2.cu, docs/CUDA_MMQ.md): weights in the split
// layout (q4_0, q8_0, q4_K, q6_K) and min_cols <= n <= max_cols read each weight byte once per 64
// columns, dequantize it to f16 in registers and multiply f16 activations with mma.sync (f32 sums).
// matmul() and matmul_parts() take it where mmq_takes(w, n); the defaults are tunable by
// POLYKV_CUDA_MMQ_MIN / POLYKV_CUDA_MMQ_MAX, POLYKV_CUDA_MMQ=0 turns it off, POLYKV_CUDA_MMQ_SPLITS=s
// forces the K split (0: automatic). Below min_cols the mat-vec kernels run, above max_cols cuBLAS.
// Batch invariant within its range (a column's bits do not depend on the other columns, whatever their
// number); not the same bits as the mat-vec path (f16 instead of 8-bit activations).
constexpr int kMmqDefaultMinCols = 9;
// 128: on the H200 (CudaMmqBench.DISABLED_VsOldPath, 2026-12-01e) kernel v3 beats dequantize + cuBLAS over a
// llama-3.1-8b layer at 16..128 columns for every split type (at 128: q4_0 421 vs 520 us, q8_0 448 vs 531,
// q4_K 579 vs 951, q6_K 587 vs 623). (The first kernel, v1, lost at 128 for q4_0 / q8_0: the range was 9..64.)
constexpr int kMmqDefaultMaxCols = 128;
bool mmq_takes(const WeightMatrix& w, int n);
// Whether w is a matrix the kernel takes (layout, type), whatever n.
bool mmq_supports(const WeightMatrix& w);
// The kernel alone, any n >= 1 (tests and benchmarks).
void matmul_mmq(const WeightMatrix& w, const float* x, float* y, int n, CudaContext& ctx);
// Tests and benchmarks (not thread-safe; set while no matmul runs): the switch, the column range and
// the forced K split (0: what the environment or the defaults set; splits from the environment or
// automatic).
void set_mmq(bool on, int min_cols = 0, int max_cols = 0, int splits = 0);
bool mmq_enabled();
int mmq_min_cols();
int mmq_max_cols();

// cuBLAS GEMMs issued so far by matmul() / matmul_parts() (process-wide): the backend records a step in a
// CUDA graph only if its eager run issued none (cuBLAS may allocate its workspace while captured).
uint64_t cublas_call_count();

// Whether kernels on ctx's stream launch with programmatic dependent launch (sm_90 and on, unless
// turned off: set_matvec_pdl, POLYKV_CUDA_PDL=0): the mat-vec kernels, their activation kernels and
// the decoder's fused ops (ops_cuda_fused.h, ops_cuda_acts.h) take it as their `pdl` argument.
bool pdl_enabled(const CudaContext& ctx);
void set_pdl_enabled(bool on);
// Forces the mat-vec stream kernel's rows per warp (1; > 1: the type's widest; 0: chosen per matrix),
// process-wide; results do not depend on it (also declared in matmul_cuda_internal.h).
void set_matvec_rows_per_warp(int r);
// The small float mat-vec (one column, f32 / f16 / bf16, <= 1024 rows of <= 4096 values; matmul_cuda_small.cu):
// on unless POLYKV_CUDA_MATVEC_REGS=0 or turned off here (then the stream kernel: the same bits); whether it
// takes w for ncols columns. Process-wide, not thread-safe (tests and benchmarks).
void set_matvec_float_regs(bool on);
bool matvec_float_regs_takes(const WeightMatrix& w, int ncols);

// dst[i][:] = dequantize(row rows[i] of w) * scale, i < n; rows: device [n]; dst: device [n][w.n_in].
// (token embeddings) Values are dequantize_row_ref's times scale exactly (a zero may change sign); a
// row index outside [0, w.n_out) gives a row of NaN.
void dequantize_rows(const WeightMatrix& w, const int32_t* rows, int n, float scale, float* dst, cudaStream_t stream);

}  // namespace polykv::cuda
