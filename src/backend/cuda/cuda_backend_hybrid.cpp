#include "backend/cuda/cuda_backend_hybrid.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "kv/recurrent_state.h"

namespace polykv::cuda {

CudaHybrid::CudaHybrid(CudaContext& ctx) : ctx_(ctx) {
  const char* g = std::getenv("POLYKV_CUDA_GDN");
  chunked_ = !(g && std::strcmp(g, "tokens") == 0);
}

CudaHybrid::~CudaHybrid() {
  if (table_) {  // a destructor: no throwing
    cudaStreamSynchronize(ctx_.stream());
    cudaFree(table_);
    cudaGetLastError();
  }
}

void CudaHybrid::begin_step(std::span<const StepSeq> seqs, const KvMemory& memory) {
  host_.clear();
  has_states_ = false;
  int with_state = 0;
  for (const StepSeq& s : seqs) {
    const RecurrentState* r = s.kv->recurrent_state();
    if (!r) continue;
    ++with_state;
    check(&r->memory() == &memory, "CUDA backend: a hybrid sequence whose recurrent state is in ", r->memory().name(),
          " memory, not this GPU's (", memory.name(), "): make its KV from the pool of this backend's model");
    if (with_state == 1)
      rshape_ = r->shape();
    else
      check(r->shape() == rshape_, "CUDA backend: step sequences with different recurrent state shapes");
  }
  if (with_state == 0) return;
  check(with_state == int(seqs.size()), "CUDA backend: a step mixes sequences with and without a recurrent state");
  max_rows_ = 0;
  for (const StepSeq& s : seqs) {  // everything checked: start the states' steps
    RecurrentState* r = s.kv->recurrent_state();
    max_rows_ = std::max(max_rows_, s.n);
    r->begin_step(s.pos0, s.n);
    host_.push_back({r->conv(0), r->next_conv(0), r->log_row(0, 0), s.row0, s.n});
  }
  shape_ = gdn_shape(rshape_);
  has_states_ = true;
  if (host_.size() > capacity_) {
    POLYKV_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream()));  // the old table may still be read
    if (table_) POLYKV_CUDA_CHECK(cudaFree(table_));
    table_ = nullptr;
    capacity_ = std::max<size_t>(host_.size(), 2 * capacity_);
    POLYKV_CUDA_CHECK(cudaMalloc(&table_, capacity_ * sizeof(GdnSeqDevice)));
    ++generation_;
  }
  // From pageable memory: the runtime copies the bytes out before returning (host_ may change next step).
  POLYKV_CUDA_CHECK(cudaMemcpyAsync(table_, host_.data(), host_.size() * sizeof(GdnSeqDevice), cudaMemcpyHostToDevice,
                                    ctx_.stream()));
}

void CudaHybrid::require_states(const char* op) const {
  check(has_states_, "CUDA backend: ", op, " on a step whose sequences have no recurrent state (KV made without the "
        "model's kv_shape()?)");
}

void CudaHybrid::deinterleave(const float* src, int rows, int groups, int a, int b, float* dst_a, float* dst_b) {
  cuda::deinterleave(src, rows, groups, a, b, dst_a, dst_b, ctx_.stream());
}

void CudaHybrid::sigmoid_mul(float* x, const float* gate, int64_t n) { cuda::sigmoid_mul(x, gate, n, ctx_.stream()); }

void CudaHybrid::ssm_conv(int state_layer, const float* w, int kernel, const float* x, float* out, int channels) {
  require_states("ssm_conv");
  check(shape_.channels == channels && shape_.kernel == kernel, "CUDA ssm_conv: state shape mismatch");
  cuda::ssm_conv(table_, int(host_.size()), shape_, state_layer, w, x, out, max_rows_, ctx_.stream());
}

void CudaHybrid::gated_delta_rule(int state_layer, const GdnParams& p, const float* qkv, const float* alpha,
                                  const float* beta_logit, const float* dt_bias, const float* a, float* out) {
  require_states("gated_delta_rule");
  cuda::gated_delta_rule(table_, int(host_.size()), shape_, state_layer, p, qkv, alpha, beta_logit, dt_bias, a, out,
                         max_rows_, chunked_, ctx_.stream());
}

}  // namespace polykv::cuda
