// Weights in the split layout (matmul_cuda_split.cuh: WeightLayout::CudaSplit) for the CUDA mat-vec:
// which types take it, the switch, and the upload that repacks ggml rows into it. Host-clean
// (cuda_backend.cpp and the tests include it). Every CUDA matmul entry point (matmul, matvec,
// matmul_parts, the prepared variants, dequantize_rows) reads both layouts; the results are the same
// bits (the tensor-core path's too: its f16 tiles are the same).
#pragma once
#include <cstddef>
#include <cstdint>

#include "backend/cpu/matmul.h"
#include "backend/cuda/cuda_context.h"

namespace polykv::cuda {

// Whether upload_matrix stores weights of type t in the split layout: q4_0, q8_0, q4_K, q5_K and q6_K (q5_K not
// with POLYKV_CUDA_SPLIT_Q5K=0), unless POLYKV_CUDA_MATVEC=old (the ggml rows and
// the stream kernel, as before 2026-12-01c). Read once.
bool split_layout_enabled(DType t);
// Whether type t's split layout is on at all (has_split, and not POLYKV_CUDA_SPLIT_Q5K=0 for q5_K; not
// POLYKV_CUDA_MATVEC): also the MoE expert uploads' rule (moe_split_upload).
bool split_type_enabled(DType t);
// Tests and benchmarks: forces the switch (true: split where the type has it; false: old).
void set_split_layout_enabled(bool on);

// Whether the host matrix can be repacked (a type with a split layout, whole blocks, rows).
bool split_layout_fits(const WeightMatrix& host);
// Bytes per split row of n_in values of type t (16-byte multiple; the ggml row's when that is one).
size_t split_row_stride(DType t, int64_t n_in);
// Rows [row0, row0 + rows) of host (ggml rows in host memory) in the split layout into dst (host
// memory, rows x split_row_stride bytes).
void split_pack_rows_host(const WeightMatrix& host, int64_t row0, int64_t rows, uint8_t* dst);
// Repacks host's rows into dst (device memory of host.n_out x split_row_stride bytes, 16-byte
// aligned) through a host buffer of ~32 MiB, on stream (synchronously); returns the device matrix.
WeightMatrix upload_split(const WeightMatrix& host, void* dst, cudaStream_t stream);

}  // namespace polykv::cuda
