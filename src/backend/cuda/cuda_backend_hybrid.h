// The CUDA backend's part for hybrid models (backend/backend.h, "hybrid models"), kept out of
// cuda_backend.cpp: CudaBackend forwards begin_step and the four hybrid ops here.
//
// Each step sequence of a hybrid model has its recurrent state (kv/recurrent_state.h) in the backend's
// CudaKvMemory (device memory: a paged KV over the backend's pool makes it there). begin_step starts
// every state's step and uploads one GdnSeqDevice per sequence (the slots' and the log's device
// addresses) into a grow-only device table, which every layer's ssm_conv / gated_delta_rule reads.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_context.h"
#include "backend/cuda/gdn_cuda.h"

namespace polykv::cuda {

class CudaHybrid {
 public:
  // POLYKV_CUDA_GDN=tokens: every step token by token (the chunked form off, for A/B runs and bit-identity).
  explicit CudaHybrid(CudaContext& ctx);
  ~CudaHybrid();
  CudaHybrid(const CudaHybrid&) = delete;
  CudaHybrid& operator=(const CudaHybrid&) = delete;

  // Throws Error (before issuing anything) when a sequence has a recurrent state outside `memory`
  // (the backend's device memory). Sequences without a state (other models): nothing to do.
  void begin_step(std::span<const StepSeq> seqs, const KvMemory& memory);
  // Changes whenever the device table moves (recorded CUDA graphs hold its address).
  uint64_t generation() const { return generation_; }

  void deinterleave(const float* src, int rows, int groups, int a, int b, float* dst_a, float* dst_b);
  void sigmoid_mul(float* x, const float* gate, int64_t n);
  void ssm_conv(int state_layer, const float* w, int kernel, const float* x, float* out, int channels);
  void gated_delta_rule(int state_layer, const GdnParams& p, const float* qkv, const float* alpha,
                        const float* beta_logit, const float* dt_bias, const float* a, float* out);

 private:
  void require_states(const char* op) const;

  CudaContext& ctx_;
  std::vector<GdnSeqDevice> host_;  // this step's table
  GdnSeqDevice* table_ = nullptr;   // device copy, capacity_ entries
  size_t capacity_ = 0;
  uint64_t generation_ = 0;
  bool has_states_ = false;         // every step sequence has a recurrent state
  bool chunked_ = true;             // prompt chunks take the chunked delta rule
  int max_rows_ = 0;                // this step's most rows of a sequence
  GdnShapeDevice shape_;
  RecurrentShape rshape_;
};

}  // namespace polykv::cuda
