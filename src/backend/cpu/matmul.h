// Matrix multiplication with weights in their stored type.
//   y[t][o] = sum_i W[o][i] * x[t][i]
// W: [n_out][n_in] rows of `type` (ggml order: ne[0] = n_in), x: [n_tokens][n_in] f32,
// y: [n_tokens][n_out] f32. Small n_tokens (1..8) is the mat-vec case and must be fast.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/dtype.h"
#include "core/thread_pool.h"

namespace polykv {
namespace cpu {
struct PackedMatrix;
}

// How a row's bytes are ordered. Rows: ggml's blocks (the only layout the CPU reads). CudaSplit: the
// CUDA backend's device copies of some quantized types (backend/cuda/matmul_cuda_split.cuh): each row
// in its row_stride bytes, its blocks' quants first and their scales after.
enum class WeightLayout : uint8_t { Rows, CudaSplit };

struct WeightMatrix {
  DType type = DType::F32;
  const void* data = nullptr;  // n_out rows of row_bytes(type, n_in) bytes
  int64_t n_in = 0;
  int64_t n_out = 0;
  size_t row_stride = 0;  // bytes between rows
  // Optional copy of the rows in the CPU backend's interleaved layout (backend/cpu/packed_weights.h),
  // made by pack_for_matmul(); matmul() prefers it where it has a kernel for the active ISA. `data`
  // stays valid and authoritative (matmul_ref, embedding lookups and the n_out % 16 tail rows read it).
  std::shared_ptr<const cpu::PackedMatrix> packed;
  WeightLayout layout = WeightLayout::Rows;  // last: aggregate initializers name the fields above
};

// Model-load step: gives w a packed copy if the CPU backend has a faster kernel for that layout under
// the active ISA (today q4_0 / q8_0 with AVX-512 VNNI or AVX2); otherwise leaves w unchanged. Costs a
// second copy of the matrix in memory (as large as the original).
void pack_for_matmul(WeightMatrix& w);

// True if matmul() on this CPU reads w.data (false when w.packed holds every row and has a kernel for
// the detected ISA). When false, a caller that does not read the rows itself may release the
// original's memory (e.g. drop the pages of a file map); w.data must stay valid for matmul_ref.
bool matmul_reads_original(const WeightMatrix& w);

// Optimized, multithreaded (SIMD chosen at run time for the CPU it runs on).
void matmul(const WeightMatrix& w, const float* x, float* y, int64_t n_tokens, ThreadPool& pool);

// The same results as matmul() (the same kernels and activations, bit for bit), computed on the calling thread
// alone: for callers that spread several products over the threads themselves (moe_experts_cpu's decode steps).
void matmul_serial(const WeightMatrix& w, const float* x, float* y, int64_t n_tokens);

// Scalar reference: dequantize each row with dequantize_row_ref and accumulate in double.
void matmul_ref(const WeightMatrix& w, const float* x, float* y, int64_t n_tokens);

// Name of the kernel set matmul() dispatches to on this CPU ("avx512", "avx2" or "scalar").
const char* matmul_isa();

}  // namespace polykv
