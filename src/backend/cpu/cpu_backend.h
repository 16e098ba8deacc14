// The CPU backend (backend/backend.h): host memory, a ThreadPool, the SIMD kernels of backend/cpu.
// It is the reference every other backend is tested against, and it keeps the decoder's results
// bit-identical to calling those kernels directly (each op is the same kernel call, in the same
// order per row).
//
// Rules:
//  - "Backend memory" is host memory: ops take host pointers; upload/download are memcpy and
//    nothing is asynchronous.
//  - Weights are not copied: upload_matrix returns the host matrix itself (with the packed copy the
//    loader made, model/weights.h) and upload_floats the host pointer, so the caller keeps both alive.
//  - Calls are not reentrant and come from one thread at a time (the ThreadPool's rule).
#pragma once
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/moe_cpu.h"
#include "core/thread_pool.h"

namespace polykv {

class CpuBackend final : public Backend {
 public:
  // Owns a pool of `threads` workers (<= 0: all cores). Throws Error if a thread cannot be started.
  explicit CpuBackend(int threads = 0);
  // Borrows `pool`, which must outlive the backend.
  explicit CpuBackend(ThreadPool& pool);
  ~CpuBackend() override;

  // The pool the ops run on, for callers with work of their own (e.g. a bandwidth probe).
  ThreadPool& pool() { return *pool_; }
  // Runs later ops on `pool` (borrowed; it must outlive its use). bench's --fill-threads uses it.
  void set_pool(ThreadPool& pool) { pool_ = &pool; }

  DeviceKind kind() const override { return DeviceKind::Cpu; }
  std::string describe() const override;
  double measure_bandwidth() override;

  void* allocate(size_t bytes) override;
  void release(void* p) override;
  void upload(void* dst, const void* src_host, size_t bytes) override;
  void download(void* dst_host, const void* src, size_t bytes) override;
  void synchronize() override {}
  KvMemory& kv_memory() override;

  WeightMatrix upload_matrix(const WeightMatrix& host) override { return host; }
  const float* upload_floats(std::span<const float> host) override { return host.data(); }

  void embed(const WeightMatrix& table, const int32_t* tokens, int n, float scale, float* x) override;
  void matmul(const WeightMatrix& w, const float* x, float* y, int n) override;
  // rmsnorm, rope, gated_activation, add_rmsnorm, rope_qk, qk_norm_rope: cpu_backend_rowops.cpp (spread over the pool)
  void rmsnorm(const float* x, const float* w, float* out, int rows, int cols, float eps) override;
  void add_bias(float* x, const float* b, int rows, int cols) override;
  void add(float* x, const float* y, int64_t n) override;
  void rope(float* x, int rows, int n_heads, int head_dim, int n_rot, const int32_t* pos, const float* inv_freq,
            float scale, RopeStyle style) override;
  void gated_activation(float* gate, const float* up, int64_t n, Activation act) override;
  void add_rmsnorm(float* x, const float* r, const float* w, float* out, int rows, int cols, float eps) override;
  void rope_qk(float* q, int n_head, float* k, int n_head_kv, int rows, int head_dim, int n_rot, const int32_t* pos,
               const float* inv_freq, float scale, RopeStyle style) override;
  void qk_norm_rope(float* q, const float* q_norm, int n_head, float* k, const float* k_norm, int n_head_kv, int rows,
                    int head_dim, float eps, int n_rot, const int32_t* pos, const float* inv_freq, float scale,
                    RopeStyle style) override;
  void softcap(float* x, int64_t n, float cap) override;
  void gather_rows(const float* src, const int32_t* rows, int n, int cols, float* dst) override;
  void argmax_rows(const float* x, int rows, int cols, int32_t* out) override;

  void moe_route(const float* logits, int n, const MoeRouting& r, int32_t* ids, float* weights) override;
  void moe_experts(const MoeExperts& w, const float* x, const int32_t* ids, const float* weights, int n, int k,
                   float* out) override;
  void add_sigmoid_gated(float* x, const float* y, const float* g, int rows, int cols) override;

  void begin_step(std::span<const StepSeq> seqs) override;
  void store_kv(int layer, float* k, const float* v) override;
  void attention(int layer, const AttentionParams& p, float* q, float* out) override;

  // hybrid models (cpu_backend_hybrid.cpp)
  void deinterleave(const float* src, int rows, int groups, int a, int b, float* dst_a, float* dst_b) override;
  void sigmoid_mul(float* x, const float* gate, int64_t n) override;
  void ssm_conv(int state_layer, const float* w, int kernel, const float* x, float* out, int channels) override;
  void gated_delta_rule(int state_layer, const GdnParams& p, const float* qkv, const float* alpha,
                        const float* beta_logit, const float* dt_bias, const float* a, float* out) override;

 private:
  std::unique_ptr<ThreadPool> own_pool_;  // null when borrowed
  ThreadPool* pool_;
  std::vector<StepSeq> step_;            // the sequences of the current step (begin_step)
  std::vector<AttentionSeq> attn_seqs_;  // scratch of attention(), [step_.size()]
  std::vector<float> gdn_scratch_;       // scratch of gated_delta_rule(): the step's prepared inputs
  MoeScratch moe_;                       // scratch of moe_experts()
};

}  // namespace polykv
