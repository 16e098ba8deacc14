// What every CUDA kernel launcher of the backend needs: the device, the stream all work is issued on
// (one stream: ops run in issue order), the cuBLAS handle bound to it, and grow-only scratch buffers.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/cuda/cuda_check.h"

namespace polykv::cuda {

// Named scratch slots, so launchers that run in one op do not share a buffer by accident.
// FusedActs: 8-bit activations written by an op for the next mat-vec (ops_cuda_acts.h). Moe: moe_cuda.h.
enum class Scratch { MatmulWeights, MatmulActs, MatmulOut, AttentionPartials, AttentionTables, KvSlots, Misc, FusedActs, Moe, Count };

class CudaContext {
 public:
  explicit CudaContext(int device);
  ~CudaContext();
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  cublasHandle_t cublas() const { return cublas_; }
  int sm_count() const { return sm_count_; }
  int cc_major() const { return cc_major_; }
  int cc_minor() const { return cc_minor_; }

  // A device buffer of at least `bytes` for slot s; valid until the next scratch(s, larger) call.
  // Growing synchronizes the stream first (the old buffer may be in use), so it must not be
  // called while a CUDA graph is being captured with a larger size than before.
  void* scratch(Scratch s, size_t bytes);
  // Changes whenever a scratch buffer moves: recorded CUDA graphs hold scratch addresses, so a
  // graph recorded under another generation is stale.
  uint64_t scratch_generation() const { return scratch_generation_; }

  // Batch invariance (the backend's option, BackendOptions::batch_invariant; docs/CUDA_SPEC.md): when
  // set, the mat-muls take the mat-vec kernels for every column count (never mmq or cuBLAS) and
  // attention takes attn::plan_invariant's plans, so a row's results do not depend on the other rows
  // of its step. Off by default (it costs speed); set once, before the first op.
  bool batch_invariant() const { return batch_invariant_; }
  void set_batch_invariant(bool on) { batch_invariant_ = on; }

 private:
  bool batch_invariant_ = false;
  int device_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  int sm_count_ = 0, cc_major_ = 0, cc_minor_ = 0;
  std::vector<void*> scratch_ptr_;
  std::vector<size_t> scratch_bytes_;
  uint64_t scratch_generation_ = 0;
};

}  // namespace polykv::cuda
