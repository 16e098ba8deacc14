// The seam between the decoder (model/transformer.cpp) and the hardware that runs it. The model is
// written once against this small op set; a backend owns its memory and kernels:
//   - CpuBackend (backend/cpu/cpu_backend.h): the reference; host memory, a ThreadPool, the SIMD
//     kernels of backend/cpu.
//   - CudaBackend (backend/cuda/cuda_backend.h, built with POLYKV_CUDA): device memory, CUDA
//     kernels, cuBLAS for prefill, the KV pool in device memory.
//
// Rules every backend keeps:
//  - Pointers passed to ops (activations, uploaded weights, positions, tokens) are in the backend's
//    memory ("backend memory": host for CPU, device for CUDA); upload()/download() cross it. Ops may
//    run asynchronously; download() and synchronize() wait for everything issued before them.
//  - All float activations are f32, row-major, contiguous: [rows][cols].
//  - Results do not depend on how tokens are batched: every op computes a row from that row's inputs
//    only, in a fixed reduction order (the engine's "batching never changes a token", model/model.h).
//    CpuBackend keeps it bit for bit; a GPU backend keeps it for its own kernels.
//  - kv/ bookkeeping and engine/ never see a device type: a backend's KV pool memory is a KvMemory
//    (kv/kv_memory.h), sequences are KvSequence.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/cpu/attention.h"
#include "backend/cpu/gated_delta_net.h"
#include "backend/cpu/matmul.h"
#include "backend/moe.h"
#include "core/layer_kinds.h"
#include "kv/kv_memory.h"
#include "kv/kv_sequence.h"

namespace polykv {

enum class DeviceKind { Cpu, Cuda };

// One sequence of a forward step, as the backend sees it: its KV, the positions its rows take and
// where its rows sit in the step's activations.
struct StepSeq {
  KvSequence* kv = nullptr;
  int pos0 = 0;  // position of its first row (the KV holds 0 .. pos0 - 1 before the step)
  int n = 0;     // rows (tokens) of this sequence in the step
  int row0 = 0;  // first row in the step's activation buffers; sequences are contiguous, in order
};

// The biases of q, k and v (Qwen 2.x's and gpt-oss's attention) for Backend::matmul_qkv_rope: all three, or none
// (q == nullptr). The backend's memory (its uploads).
struct QkvBias {
  const float* q = nullptr;  // [n_head * head_dim]
  const float* k = nullptr;  // [n_head_kv * head_dim]
  const float* v = nullptr;  // [rows of v]
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual DeviceKind kind() const = 0;
  virtual std::string describe() const = 0;  // "cpu (avx512, 2 threads)", "cuda:0 NVIDIA H200 (sm_90)"
  // Whether every row of a step gets the bits it would get in a step of its own (BackendOptions::
  // batch_invariant). The CPU backend always does (docs/VERIFY_KERNELS.md); CUDA when asked to.
  virtual bool batch_invariant() const { return true; }
  // Whether the sequences of one step (begin_step) must all keep their KV in the same pool (block
  // store). The CPU backend reads each sequence's own store; the CUDA backend addresses one pool per
  // step (cuda_backend_plan.cpp), so callers that batch sequences with private KVs (the MTP head's)
  // group them per pool there.
  virtual bool one_kv_pool_per_step() const { return false; }
  // Prompt rows per forward pass when the caller sets none (--ubatch; the engine's step budget). The CPU's
  // packed GEMMs gain nothing from longer passes (pp2048 at 512 and 2048 rows the same on Zen 5); CUDA
  // prefill dequantizes each weight to f16 once per pass for cuBLAS, so its passes are 4096 rows
  // (pp4096 1.46-1.62x against 512: docs/PERFORMANCE.md, "Sixteenth session"). Scratch grows with it.
  virtual int default_prompt_rows() const { return 512; }

  // ---- memory -------------------------------------------------------------------------------
  // Bytes in backend memory (uninitialized); throws Error when they cannot be had.
  virtual void* allocate(size_t bytes) = 0;
  virtual void release(void* p) = 0;
  virtual void upload(void* dst, const void* src_host, size_t bytes) = 0;
  virtual void download(void* dst_host, const void* src, size_t bytes) = 0;  // waits for prior ops
  virtual void synchronize() = 0;
  // Host memory that download() fills fastest (CUDA: page-locked, so one copy runs at the bus's speed
  // with no staging); the default is plain heap memory. Throws Error when it cannot be had.
  virtual void* allocate_host(size_t bytes);
  virtual void release_host(void* p);
  // Stream-ordered variants for pipelined steps (Model's chained greedy steps, engine/step_switch.h):
  // none waits for work issued before it. upload_async: src may be reused as soon as it returns (CUDA
  // stages it in page-locked memory). copy: backend memory to backend memory, after the work before it.
  // download_async: into dst_host, memory of allocate_host that stays alive until wait_download(ticket)
  // returns; wait_download blocks until that copy (not later work) has landed. The defaults are the
  // synchronous ops (a backend whose ops finish before they return).
  virtual void upload_async(void* dst, const void* src_host, size_t bytes) { upload(dst, src_host, bytes); }
  virtual void copy(void* dst, const void* src, size_t bytes);
  virtual uint64_t download_async(void* dst_host, const void* src, size_t bytes) {
    download(dst_host, src, bytes);
    return 0;
  }
  virtual void wait_download(uint64_t /*ticket*/) {}
  // Where a KV pool for this backend keeps its blocks (KvBlockStore's memory).
  virtual KvMemory& kv_memory() = 0;
  // Measured bandwidth of the memory the weights and KV are read from, in bytes/s (CPU: a
  // multithreaded read of a large buffer; CUDA: a large device-to-device copy, bytes read + written);
  // what bench's decode floor divides by. 0 if the backend cannot measure it.
  virtual double measure_bandwidth() { return 0; }

  // ---- weights (once, at model load) --------------------------------------------------------
  // A matrix the backend's matmul reads: the same type and shape, rows in backend memory (CPU: the
  // host matrix itself, possibly packed; CUDA: a device copy). The host matrix stays valid.
  virtual WeightMatrix upload_matrix(const WeightMatrix& host) = 0;
  // A vector of floats (norm weights, biases, RoPE frequencies) in backend memory, kept for the
  // backend's lifetime (CPU may return the host pointer itself: the caller keeps it alive).
  virtual const float* upload_floats(std::span<const float> host) = 0;

  // ---- ops (all pointers in backend memory) -------------------------------------------------
  // x[t] = dequantize(table row tokens[t]) * scale; tokens: [n] (in range, checked by the caller),
  // x: [n][table.n_in].
  virtual void embed(const WeightMatrix& table, const int32_t* tokens, int n, float scale, float* x) = 0;
  // y[t][o] = sum_i w[o][i] x[t][i]; x: [n][w.n_in], y: [n][w.n_out].
  virtual void matmul(const WeightMatrix& w, const float* x, float* y, int n) = 0;
  // out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w; rows of `cols`; out may alias x.
  virtual void rmsnorm(const float* x, const float* w, float* out, int rows, int cols, float eps) = 0;
  // x[r][c] += b[c] (bias, broadcast over rows).
  virtual void add_bias(float* x, const float* b, int rows, int cols) = 0;
  // x[i] += y[i].
  virtual void add(float* x, const float* y, int64_t n) = 0;
  // RoPE of rows of n_heads heads: row r at position pos[r]; the angle of pair i is
  // (pos / scale) * inv_freq[i]; only the first n_rot dims of each head rotate. x: [rows][n_heads][head_dim].
  virtual void rope(float* x, int rows, int n_heads, int head_dim, int n_rot, const int32_t* pos,
                    const float* inv_freq, float scale, RopeStyle style) = 0;
  // gate[i] = act(gate[i]) * up[i].
  virtual void gated_activation(float* gate, const float* up, int64_t n, Activation act) = 0;
  // x[i] = cap * tanh(x[i] / cap).
  virtual void softcap(float* x, int64_t n, float cap) = 0;
  // dst[i] = src[rows[i]] for i < n; rows (backend memory) index rows of `cols` floats.
  virtual void gather_rows(const float* src, const int32_t* rows, int n, int cols, float* dst) = 0;
  // out[r] = argmax_first_ref(x + r cols, cols) (core/argmax_ref.h: the first maximum, NaN / -inf never win,
  // -1 for none) for r < rows; x: [rows][cols] logits, out: [rows], both backend memory. What greedy
  // decoding reads instead of whole logit rows (Model::BatchSeq::argmax). Default: each row downloaded
  // and scanned on the host, the results uploaded.
  virtual void argmax_rows(const float* x, int rows, int cols, int32_t* out);

  // ---- mixture of experts (backend/moe.h; optional: the defaults throw Error "not supported") ----
  // The n_expert slices of one expert tensor (host matrices of one type and shape, e.g. a GGUF 3-D
  // tensor's) in backend memory, laid out as this backend's moe_experts reads them (CUDA: one
  // allocation, ggml rows, expert e at a fixed stride). Default: upload_matrix of each.
  virtual std::vector<WeightMatrix> upload_experts(std::span<const WeightMatrix> host);
  // Routing of n rows: logits [n][r.n_expert] (router bias added) -> ids [n][r.n_used] (expert
  // indices, descending logit) and weights [n][r.n_used] (per r.gating). Each row on its own.
  virtual void moe_route(const float* logits, int n, const MoeRouting& r, int32_t* ids, float* weights);
  // out[t] = sum over slots j in order 0..k-1 of weights[t][j] * expert_{ids[t][j]}(x[t]), with
  // expert_e(x) = down_e(act(gate_e x + bg_e, up_e x + bu_e)) + bd_e. x, out: [n][n_embd] (out may
  // alias x); ids, weights: [n][k]. A row's result does not depend on the other rows (each expert's
  // matmuls reduce per row; the slot sum runs in slot order), so a backend may group rows by expert.
  virtual void moe_experts(const MoeExperts& w, const float* x, const int32_t* ids, const float* weights, int n,
                           int k, float* out);
  // moe_route(logits, n, r, ids, weights), then moe_experts(w, x, ids, weights, n, r.n_used, out): the default
  // is those two ops; a backend may fuse them (CUDA: the one-token step routes inside its gate+up launch) and
  // must give the same ids, weights and out bits.
  virtual void moe_route_experts(const MoeExperts& w, const float* x, const float* logits, const MoeRouting& r, int n,
                                 int32_t* ids, float* weights, float* out);
  // x[r][c] += sigmoid(g[r]) * y[r][c]: a shared expert's output y behind its scalar gate g ([rows]).
  virtual void add_sigmoid_gated(float* x, const float* y, const float* g, int rows, int cols);

  // ---- fused ops (optional): each default issues the plain ops above, and a backend that fuses
  // them must give the same bits (CpuBackend: add_rmsnorm, rope_qk and qk_norm_rope, the same per-row code) ---------
  // parts[i].y = parts[i].w · x for every i (matrices of the same n_in reading the same x: q, k, v;
  // gate, up); y: [n][w.n_out]. A backend may compute them in one pass over x.
  struct MatmulOut {
    const WeightMatrix* w;
    float* y;
  };
  virtual void matmul_multi(std::span<const MatmulOut> parts, const float* x, int n) {
    for (const MatmulOut& p : parts) matmul(*p.w, x, p.y, n);
  }
  // x += r; out = rmsnorm(x) * w (add, then rmsnorm). out may alias r.
  virtual void add_rmsnorm(float* x, const float* r, const float* w, float* out, int rows, int cols, float eps) {
    add(x, r, int64_t(rows) * cols);
    rmsnorm(x, w, out, rows, cols, eps);
  }
  // The norm in front of a matmul: r == nullptr: out = rmsnorm(x) * w; else x += r, then that. The caller
  // promises that the next op reads out and is a matmul, matmul_multi or matmul_qkv_rope of out, and that
  // nothing reads out after it (until out is written again). A backend may then leave out unwritten and
  // fold the normalization into that op: CUDA quantizes x * w as the mat-vec's activations and scales its
  // outputs by 1 / rms(x) (docs/CUDA_DECODE.md, "Deferred norms"). The default is the plain norm.
  virtual void rmsnorm_into_matmul(float* x, const float* r, const float* w, float* out, int rows, int cols,
                                   float eps) {
    if (r != nullptr) add_rmsnorm(x, r, w, out, rows, cols, eps);
    else rmsnorm(x, w, out, rows, cols, eps);
  }
  // A block's output r normed by its post-norm (Gemma's sandwich norms: r = rmsnorm(r) * w_post), then
  // rmsnorm_into_matmul(x, r, w, out, ...) (x += r; out = rmsnorm(x) * w for the next matmul only). Afterwards r
  // holds unspecified values (a backend may leave it unnormed); callers pass r = out.
  virtual void post_norm_into_matmul(float* x, float* r, const float* w_post, const float* w, float* out, int rows,
                                     int cols, float eps) {
    rmsnorm(r, w_post, r, rows, cols, eps);
    rmsnorm_into_matmul(x, r, w, out, rows, cols, eps);
  }
  // rope of q ([rows][n_head][head_dim]) and of k ([rows][n_head_kv][head_dim]) at the same positions.
  virtual void rope_qk(float* q, int n_head, float* k, int n_head_kv, int rows, int head_dim, int n_rot,
                       const int32_t* pos, const float* inv_freq, float scale, RopeStyle style) {
    rope(q, rows, n_head, head_dim, n_rot, pos, inv_freq, scale, style);
    rope(k, rows, n_head_kv, head_dim, n_rot, pos, inv_freq, scale, style);
  }
  // The per-head norms of q and k (Qwen 3, Gemma 3), then their rope: rmsnorm of every head of q by q_norm
  // ([head_dim]) and of k by k_norm, in place, then rope_qk. A backend may do it in one pass over q and k.
  virtual void qk_norm_rope(float* q, const float* q_norm, int n_head, float* k, const float* k_norm, int n_head_kv,
                            int rows, int head_dim, float eps, int n_rot, const int32_t* pos, const float* inv_freq,
                            float scale, RopeStyle style) {
    rmsnorm(q, q_norm, q, rows * n_head, head_dim, eps);
    rmsnorm(k, k_norm, k, rows * n_head_kv, head_dim, eps);
    rope_qk(q, n_head, k, n_head_kv, rows, head_dim, n_rot, pos, inv_freq, scale, style);
  }

  // matmul_multi over qkv = {q, k, v} (qkv[0].y = q: [n][n_head][head_dim], qkv[1].y = k:
  // [n][n_head_kv][head_dim]), then add_bias of q, k and v (bias.q != nullptr), then rope_qk of q and k at
  // positions pos.
  virtual void matmul_qkv_rope(std::span<const MatmulOut> qkv, const float* x, int n, int n_head, int n_head_kv,
                               int head_dim, int n_rot, const int32_t* pos, const float* inv_freq, float scale,
                               RopeStyle style, const QkvBias& bias = {}) {
    matmul_multi(qkv, x, n);
    if (bias.q != nullptr) {
      add_bias(qkv[0].y, bias.q, n, int(qkv[0].w->n_out));
      add_bias(qkv[1].y, bias.k, n, int(qkv[1].w->n_out));
      add_bias(qkv[2].y, bias.v, n, int(qkv[2].w->n_out));
    }
    rope_qk(qkv[0].y, n_head, qkv[1].y, n_head_kv, n, head_dim, n_rot, pos, inv_freq, scale, style);
  }

  // ---- KV and attention ---------------------------------------------------------------------
  // The sequences of this forward step (host memory, valid until the next begin_step). store_kv and
  // attention below act on all of them. A backend may refuse a sequence it cannot address (CUDA needs
  // block_store() in its own kv_memory()) with an Error naming why.
  virtual void begin_step(std::span<const StepSeq> seqs) = 0;
  // Quantizes rows [pos0, pos0 + n) of every step sequence into its KV at `layer`.
  // k: [rows][n_head_kv][head_dim], v: [rows][n_head_kv][head_dim_v] (the step's rows). A backend may
  // rescale k in place (K equalization).
  virtual void store_kv(int layer, float* k, const float* v) = 0;
  // Causal attention of every step sequence's rows over its KV at `layer` (positions 0 .. pos0 + n - 1,
  // the step's own rows already stored). q: [rows][n_head][head_dim] (may be rescaled in place),
  // out: [rows][n_head][head_dim_v].
  virtual void attention(int layer, const AttentionParams& p, float* q, float* out) = 0;

  // ---- hybrid models (gated attention, Gated DeltaNet); the defaults throw Error (CPU only so far) ----
  // src rows are `groups` x (a + b) floats: dst_a [rows][groups][a] gets the first a of each group,
  // dst_b [rows][groups][b] the last b.
  virtual void deinterleave(const float* src, int rows, int groups, int a, int b, float* dst_a, float* dst_b);
  // x[i] *= sigmoid(gate[i]).
  virtual void sigmoid_mul(float* x, const float* gate, int64_t n);
  // Causal depthwise convolution + SiLU of every step sequence's rows, continuing from its recurrent state
  // (KvSequence::recurrent_state(), layer `state_layer`): x, out [rows][channels], w [channels][kernel].
  virtual void ssm_conv(int state_layer, const float* w, int kernel, const float* x, float* out, int channels);
  // The gated delta rule of every step sequence's rows over its recurrent state (backend/cpu/gated_delta_net.h):
  // qkv [rows][(2 n_k + n_v) d] (the convolution's output), alpha/beta_logit [rows][n_v], dt_bias/a [n_v];
  // out [rows][n_v][d].
  virtual void gated_delta_rule(int state_layer, const GdnParams& p, const float* qkv, const float* alpha,
                                const float* beta_logit, const float* dt_bias, const float* a, float* out);

  // ---- step graphs (optional: a backend with launch overhead records and replays steps) --------
  // After begin_step and the step's uploads, the model calls replay_step(key). `key` must fix
  // everything the step's ops depend on but the uploaded data: rows per sequence, the logit rows,
  // the workspace's addresses (the backend adds what it decided in begin_step, e.g. launch bounds).
  // True: the backend replayed the ops recorded for that key, which the model then must NOT issue.
  // False: the model issues the ops, then calls end_step_ops(), between which the backend may be
  // recording (so no op may wait for the device in between). Default: never records.
  virtual bool replay_step(uint64_t key) { return false; }
  virtual void end_step_ops() {}
};

// Options to make a backend: `device` is "cpu" or "cuda" / "cuda:N"; "auto" picks cuda when this
// build has it and a GPU is present, else cpu. threads: CPU worker threads (0: all cores).
// batch_invariant (--batch-invariant): every row of a step gets the bits it would get in a step of its
// own (a drafted token in a speculative verify step as decoded alone, a sequence whatever its batch
// companions): the CUDA backend then gives up its faster row-count-dependent kernels
// (docs/CUDA_SPEC.md); the CPU backend is batch invariant always and ignores it.
struct BackendOptions {
  std::string device = "cpu";
  int threads = 0;
  bool batch_invariant = false;
};

// Throws Error if the device is unknown, not built in ("this polykv was built without CUDA") or absent.
std::unique_ptr<Backend> make_backend(const BackendOptions& opts);
// True if this build has the CUDA backend and a GPU is visible.
bool cuda_available();

}  // namespace polykv
