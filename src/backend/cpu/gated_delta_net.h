// CPU kernels of a Gated DeltaNet layer (hybrid models): the causal short convolution with its rolling
// state, and the gated delta rule over one sequence's rows, token by token (the reference, and what
// short steps run) or in chunks (prompt chunks).
//
// The recurrence per value head j (key head j % n_k_heads), state S [d][d] (row = key dimension):
//   S <- exp(g_t) S;  S <- S + k_t (beta_t (v_t - S^T k_t))^T;  o_t = S^T q_t
// Chunked form (chunk of L rows starting from S0, G_t = g_0 + ... + g_t inside the chunk):
//   U_t = beta_t (v_t - e^{G_t} S0^T k_t) - sum_{s<t} beta_t e^{G_t-G_s} (k_t.k_s) U_s   (forward substitution)
//   o_t = e^{G_t} S0^T q_t + sum_{s<=t} e^{G_t-G_s} (q_t.k_s) U_s
//   S   = e^{G_{L-1}} S0 + sum_s e^{G_{L-1}-G_s} k_s U_s^T
// Every exponent is a difference G_t - G_s with s <= t, so <= 0 (g <= 0): nothing overflows.
#pragma once
#include <cstdint>

namespace polykv {

class ThreadPool;

struct GdnParams {
  int n_k_heads = 0;
  int n_v_heads = 0;  // a multiple of n_k_heads
  int head_dim = 0;   // d (keys and values)
  float q_scale = 1.0f;     // queries are l2-normalised, then scaled (1/sqrt(d))
  float norm_eps = 1e-6f;   // l2 normalisation: x / sqrt(sum x^2 + eps)
};

// One sequence's prepared inputs of the recurrence for n rows.
struct GdnInputs {
  int n = 0;
  const float* q = nullptr;     // [n][n_k_heads][d], normalised and scaled
  const float* k = nullptr;     // [n][n_k_heads][d], normalised
  const float* v = nullptr;     // [n][n_v_heads][d]
  const float* g = nullptr;     // [n][n_v_heads] log decay (<= 0)
  const float* beta = nullptr;  // [n][n_v_heads]
};

// Causal depthwise convolution + SiLU of one sequence's rows: out[t][c] = silu(sum_j w[c][j] x_{t-K+1+j}[c])
// where x before the rows comes from `state` ([K-1][C], oldest first). next_state: the last K-1 inputs
// after the rows (may not alias state). w: [C][K], x/out: [n][C].
void ssm_conv_rows(const float* w, int K, int C, const float* state, const float* x, int n, float* out,
                   float* next_state);

// The recurrence of value heads [h0, h1) over in.n rows: S ([n_v_heads][d][d]) is updated in place,
// out ([n][n_v_heads][d]) gets o_t. Token by token (gdn_rule_tokens, the reference) or in chunks of
// `chunk` rows (gdn_rule_chunked); the two agree to float rounding.
// gdn_rule_tokens reads the state before the rows from S0 and leaves the state after them in S (S0 == S:
// in place; otherwise S0 is only read, and heads outside [h0, h1) of S are not touched): a step that keeps
// the previous state (kv/recurrent_state.h's two slots) needs no copy of it first. Its token steps are
// kv/gated_delta_kernels.h's SIMD forms, token_step_ref's bits.
void gdn_rule_tokens(const GdnParams& p, const GdnInputs& in, const float* S0, float* S, float* out, int h0, int h1);
void gdn_rule_chunked(const GdnParams& p, const GdnInputs& in, float* S, float* out, int h0, int h1, int chunk = 64);
// gdn_rule_chunked in the widest SIMD form of core/isa.h's active_isa(): the same bytes (gated_delta_chunked.h).
void gdn_rule_chunked_fast(const GdnParams& p, const GdnInputs& in, float* S, float* out, int h0, int h1,
                           int chunk = 64);
using GdnChunkedFn = void (*)(const GdnParams&, const GdnInputs&, float*, float*, int, int, int);
GdnChunkedFn gdn_rule_chunked_avx2();    // nullptr without the ISA in this build (and on ARM64)
GdnChunkedFn gdn_rule_chunked_avx512();
#if defined(__aarch64__)
GdnChunkedFn gdn_rule_chunked_neon();    // gated_delta_net_neon.cpp
#endif

// Prepares one sequence's inputs from the convolution's output qkv [n][C] (q | k | v per row), the raw
// alpha and beta projections [n][n_v_heads] and the layer's dt_bias, a [n_v_heads]: q, k [n][n_k_heads][d]
// (l2-normalised, q scaled), v [n][n_v_heads][d], g = softplus(alpha + dt_bias) * a and
// beta = sigmoid(beta_logit) [n][n_v_heads].
void gdn_prepare(const GdnParams& p, int n, const float* qkv, const float* alpha, const float* beta_logit,
                 const float* dt_bias, const float* a, float* q, float* k, float* v, float* g, float* beta);

}  // namespace polykv
