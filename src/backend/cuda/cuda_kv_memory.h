// The CUDA backend's KvMemory (kv/kv_memory.h): a KV pool's bytes in device memory. Host code never
// reads them (host_accessible() is false); only the kernels of backend/cuda do. Hybrid models'
// recurrent states of the pool's sequences live here too (RecurrentStateOps: zeroed and replayed by
// the kernels of gdn_cuda.h).
#pragma once
#include <string>

#include "backend/cuda/cuda_check.h"
#include "kv/kv_memory.h"
#include "kv/recurrent_state.h"

namespace polykv::cuda {

class CudaKvMemory final : public KvMemory, public RecurrentStateOps {
 public:
  // Blocks on `device`; copies are issued on `stream` (the backend's one stream, so a copy-on-write
  // block copy runs in order with the kernels around it).
  CudaKvMemory(int device, cudaStream_t stream);

  // cudaMalloc (never managed memory); nullptr when the device cannot hold `bytes`.
  void* allocate(size_t bytes) override;
  // cudaFree (waits for the device's pending work first, as cudaFree does).
  void release(void* p) override;
  // Device-to-device, asynchronous on the stream.
  void copy(void* dst, const void* src, size_t bytes) override;
  bool host_accessible() const override { return false; }
  const char* name() const override { return name_.c_str(); }

  // RecurrentStateOps, asynchronous on the stream.
  void zero_floats(float* p, size_t n) override;
  void replay_recurrent(const RecurrentShape& shape, const float* from, float* to, const float* log,
                        int n_rows) override;

 private:
  int device_;
  cudaStream_t stream_;
  std::string name_;  // "cuda:N"
};

}  // namespace polykv::cuda
