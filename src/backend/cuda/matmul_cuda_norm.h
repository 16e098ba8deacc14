// Decode mat-vecs with the small ops around them folded in (docs/CUDA_DECODE.md, "Fused output
// projections and RoPE"). First, the output projection with the residual add and the next rmsnorm
// (Backend::matmul_add_rmsnorm on the GPU): x += w · in, then out = rmsnorm(x) *
// norm_w and out's 8-bit activations for the next mat-vec, in ONE launch instead of a mat-vec and an
// add+rmsnorm kernel. Same bits as cuda::matmul, then add_rmsnorm / add (and rmsnorm_acts).
// Host-clean (cuda_backend.cpp includes it).
#pragma once
#include <span>

#include "backend/cpu/matmul.h"
#include "backend/cuda/matmul_cuda.h"
#include "backend/cuda/cuda_context.h"
#include "backend/cuda/ops_cuda_acts.h"
#include "core/layer_kinds.h"

namespace polykv::cuda {

// Whether matmul_add_rmsnorm takes w with n columns: weights in the split layout, n == 1, w.n_out a
// multiple of 32 and at most 8192 (the norm tail keeps the row in registers).
bool matmul_add_rmsnorm_ok(const WeightMatrix& w, int n);

// One column: x += w · in; then, when norm_w is set, out = rmsnorm(x) * norm_w with eps, and out's
// activations into `acts` when acts.qs is set (ops_cuda_acts.h's layout). in's activations are
// `prepared` when not null (written by the op before, for in), else computed from in here. x, out:
// [w.n_out] (out must not alias x); counter: a device unsigned that is 0 (and is 0 again after the
// launch). `acts` should not live in the scratch of `prepared` (the tail writes it after every block
// has read its activations, but getting a larger buffer from that scratch would free the one read):
// cuda_backend.cpp takes it from Scratch::FusedActsOut.
void matmul_add_rmsnorm(const WeightMatrix& w, const float* in, const ActsOut* prepared, float* x,
                        const float* norm_w, float* out, float eps, ActsOut acts, unsigned* counter,
                        CudaContext& ctx);

// The q, k, v mat-vec of one column with the RoPE of q and k (Norm style: adjacent pairs) in its
// epilogue (Backend::matmul_qkv_rope on the GPU): qkv = {q, k, v}, one launch instead of the mat-vec
// and rope_qk; the bits of matmul_parts, then rope_qk (rows = 1, at position pos[0]).
// matmul_qkv_rope_ok: the three are split with one type, n_in and stride, q's and k's rows whole heads,
// head_dim and n_rot even, n_rot <= head_dim; prepared_matmul_ok for one column.
bool matmul_qkv_rope_ok(std::span<const MatvecPart> qkv, int head_dim, int n_rot);
// x's activations: `prepared` when not null, else computed here. pos: device [1]; inv_freq: device [n_rot / 2].
void matmul_qkv_rope(std::span<const MatvecPart> qkv, const float* x, const ActsOut* prepared, int head_dim, int n_rot,
                     const int32_t* pos, const float* inv_freq, float scale, CudaContext& ctx);

// gate, up = w_gate · x, w_up · x for one column with gate = act(gate) * up and gate's activations
// (acts.qs set) in the same launch (Backend::matmul_gated on the GPU): the bits of matmul_parts, then
// gated_activation(_acts). matmul_gated_ok: both split with one type, n_in, stride and rows, rows a
// multiple of 32; prepared_matmul_ok for one column. x's activations: `prepared` when not null.
// `acts` must not be the buffer of `prepared` (blocks write it while others read theirs):
// cuda_backend.cpp takes it from Scratch::FusedActsGated.
bool matmul_gated_ok(const WeightMatrix& gate, const WeightMatrix& up, int n);
void matmul_gated(const WeightMatrix& w_gate, const WeightMatrix& w_up, const float* x, const ActsOut* prepared,
                  float* gate, float* up, Activation act, ActsOut acts, CudaContext& ctx);

}  // namespace polykv::cuda
