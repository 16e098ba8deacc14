// CUDA kernels of the hybrid models' ops (backend/backend.h, "hybrid models"): gated attention's split
// and gate, and the Gated DeltaNet's short convolution and delta rule over device-resident recurrent
// states (kv/recurrent_state.h in a CudaKvMemory), plus the rollback replay of a state.
// All pointers are device pointers; everything is issued on `s`.
#pragma once
#include <cstdint>
#include <cuda_runtime.h>

#include "backend/cpu/gated_delta_net.h"
#include "kv/recurrent_state.h"

namespace polykv::cuda {

// One step sequence's state, as the kernels address it (uploaded once per step): layer L's conv
// state [K-1][C] starts at cur + L * layer_floats, its ssm state [n_v][d][d] conv_floats further;
// `next` the same in the slot the step writes; log: the step's log ([n_layer][16][log_row_floats],
// nullptr when the step is too long to be logged).
struct GdnSeqDevice {
  const float* cur = nullptr;
  float* next = nullptr;
  float* log = nullptr;
  int row0 = 0;  // first row in the step's activations
  int n = 0;     // rows
};

// The sizes of a RecurrentShape, in the units the kernels use.
struct GdnShapeDevice {
  int n_k = 0, n_v = 0, d = 0, kernel = 0, channels = 0, n_layer = 0;
  int64_t layer_floats = 0, conv_floats = 0, log_row_floats = 0, log_layer_floats = 0;
};
GdnShapeDevice gdn_shape(const RecurrentShape& s);

// src rows are `groups` x (a + b): dst_a [rows][groups][a], dst_b [rows][groups][b].
void deinterleave(const float* src, int rows, int groups, int a, int b, float* dst_a, float* dst_b, cudaStream_t s);
// x[i] *= sigmoid(gate[i])
void sigmoid_mul(float* x, const float* gate, int64_t n, cudaStream_t s);
// Causal depthwise conv + SiLU of every sequence's rows from its conv state at `layer`, writing the next
// conv state (and the log's conv inputs). w [C][K], x/out [rows][C]. Throws Error if K > kMaxConvKernel.
// max_rows: the most rows of a sequence in the step; past kMaxLoggedRows rows run in parallel (same bits).
void ssm_conv(const GdnSeqDevice* seqs, int n_seq, const GdnShapeDevice& sh, int layer, const float* w, const float* x,
              float* out, int max_rows, cudaStream_t s);
// The gated delta rule of every sequence's rows from the ssm state at `layer` into the next slot. Token by
// token (one block per (sequence, value head), one thread per state column; logs k, v, decay, beta) for
// sequences of at most RecurrentState::kMaxLoggedRows rows, and for all when `chunked` is false or the
// head size has no chunked form; the others take gated_delta_rule_chunked. max_rows: the most rows of a
// sequence in the step (the host's table).
void gated_delta_rule(const GdnSeqDevice* seqs, int n_seq, const GdnShapeDevice& sh, int layer, const GdnParams& p,
                      const float* qkv, const float* alpha, const float* beta_logit, const float* dt_bias,
                      const float* a, float* out, int max_rows, bool chunked, cudaStream_t s);
// Head sizes with a chunked form (32, 64, 128) whose block fits the current device's shared memory.
bool gdn_chunked_supported(int d);

// What the delta-rule kernels take (both forms): the layer, the sequences' row bounds each kernel serves
// (min_rows < n <= max_rows), the parameters and the step's device buffers (gated_delta_rule's).
struct GdnRuleArgs {
  int layer = 0;
  int min_rows = 0, max_rows = 0x7fffffff;
  float q_scale = 1.0f, norm_eps = 0.0f;
  const float* qkv = nullptr;
  const float* alpha = nullptr;
  const float* beta_logit = nullptr;
  const float* dt_bias = nullptr;
  const float* a = nullptr;
  float* out = nullptr;
};
// The chunked (WY) form (gdn_chunked_cuda.cu) for the sequences of more than A.min_rows rows (the others are
// skipped: their blocks return at once); never logs (such steps are not logged). Throws Error for a head
// size without it.
void gated_delta_rule_chunked(const GdnSeqDevice* seqs, int n_seq, const GdnShapeDevice& sh, const GdnRuleArgs& A,
                              cudaStream_t s);
// RecurrentStateOps::replay_recurrent: every layer's state `to` = `from` advanced by n_rows logged rows.
void gdn_replay(const GdnShapeDevice& sh, const float* from, float* to, const float* log, int n_rows, cudaStream_t s);

}  // namespace polykv::cuda
