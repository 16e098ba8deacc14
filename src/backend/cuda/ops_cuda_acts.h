// Decoder ops that also write the 8-bit activations the next mat-vec reads (the form prepare_acts
// gives quantized weights, matmul_cuda_internal.h), so that mat-vec needs no activation kernel of its
// own: rmsnorm (with the residual add) before q,k,v and gate,up; the gated activation before down.
// The float outputs are the bits of the plain ops (ops_cuda.h, ops_cuda_fused.h); the activations
// the bits of prepare_acts on those outputs (tests/cuda/ops_acts_cuda_test.cpp checks both).
// Host-clean (no device headers): cuda_backend.cpp includes it.
#pragma once
#include <cstdint>

#include "backend/cuda/cuda_context.h"
#include "core/layer_kinds.h"

namespace polykv::cuda {

// Where the activations go, for total = n columns x n_in values: qs [total] int8 and scales
// [total / 32] hd::ActScale (16 bytes each), the layout of prepare_acts (block b of the flat array is
// column b / (n_in / 32)).
struct ActsOut {
  int8_t* qs = nullptr;
  void* scales = nullptr;
  double* ss = nullptr;  // [total / 32] (fused_acts_buffer with_ss): rmsnorm_defer's sums of squares
};

// A norm deferred into the mat-vec that reads its activations (rmsnorm_defer): the activations are those
// of x * w, not yet scaled by 1 / rms(x); ss [rows][cols / 32] holds the sums of squares of x's blocks of
// 32 values (doubles). The mat-vec multiplies each output of column c by deferred_inv(ss + c * cols / 32)
// (deferred_norm.cuh): rms_inv of the row, its sum in one fixed order. ss == nullptr: no deferred norm.
struct DeferredNorm {
  const double* ss = nullptr;
  int cols = 0;
  float eps = 0;
};
constexpr int64_t kActsBlock = 32;  // values per scale (hd::kActBlock)

// A buffer for `total` activations (a multiple of 32) in ctx's FusedActs scratch; with_ss: and ss.
ActsOut fused_acts_buffer(int64_t total, CudaContext& ctx, bool with_ss = false);

// Whether these kernels can write activations for rows of `cols` values.
inline bool acts_fusable(int64_t cols) { return cols > 0 && cols % kActsBlock == 0; }

// r == nullptr: out = rmsnorm(x) * w; else x += r, then that (add_rmsnorm). Plus acts of out
// (rows x cols; acts_fusable(cols)). out may alias r or x.
// pdl: launched with programmatic dependent launch (matmul_cuda.h's pdl_enabled); clusters: each row on
// a cluster of 8 blocks (sm_90 only: the caller checks; rows of at most 8192 values;
// POLYKV_CUDA_RMS_CLUSTER=0 turns it off). Results never depend on either.
void rmsnorm_acts(float* x, const float* r, const float* w, float* out, int rows, int cols, float eps, ActsOut acts,
                  cudaStream_t s, bool pdl = false, bool clusters = false);

// The norm deferred into the next mat-vec (DeferredNorm): r != nullptr: x += r (in place); then the
// activations of x * w (acts.qs, acts.scales) and the sums of squares of x's blocks of 32 (acts.ss), for
// rows x cols (acts_fusable(cols)). out is not written: the mat-vec scales its outputs instead, and
// rmsnorm_materialize writes out when something else needs it. One warp per block of 32 values, no
// barrier and no reduction across blocks: the short chain that is its point (a whole-row norm waits for
// the row's sum before it can write anything).
void rmsnorm_defer(float* x, const float* r, const float* w, int rows, int cols, ActsOut acts, cudaStream_t s,
                   bool pdl = false);
// r = rmsnorm(r) * w_post (a post-norm: Gemma's sandwich norms), then rmsnorm_defer(x, r, w): the bits of the two,
// in one launch; r is only read (its normed values are not stored). post_norm_defer_ok: cols a multiple of 32, at
// most 8192 (the one-block rmsnorm's row in registers).
bool post_norm_defer_ok(int cols);
void post_norm_defer(float* x, const float* r, const float* w_post, const float* w, int rows, int cols, float eps,
                     ActsOut acts, cudaStream_t s, bool pdl = false);
// out = x * deferred_inv(row) * w (math::rms_out) for rmsnorm_defer's x and ss: the normed rows, for a
// reader other than the mat-vec the norm was deferred into.
void rmsnorm_materialize(const float* x, const float* w, float* out, int rows, int cols, float eps, const double* ss,
                         cudaStream_t s, bool pdl = false);

// gate[i] = act(gate[i]) * up[i] (gated_activation), plus acts of gate (n % 32 == 0).
void gated_activation_acts(float* gate, const float* up, int64_t n, Activation act, ActsOut acts, cudaStream_t s,
                           bool pdl = false);

}  // namespace polykv::cuda
