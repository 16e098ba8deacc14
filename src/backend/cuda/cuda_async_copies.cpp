#include "backend/cuda/cuda_async_copies.h"

#include <cuda_runtime.h>

#include <cstring>

#include "backend/cuda/cuda_check.h"
#include "core/error.h"

namespace polykv::cuda {

AsyncCopies::~AsyncCopies() {
  // Called from CudaBackend's destructor: report nothing, throw nothing; the copies are done after this.
  cudaStreamSynchronize(ctx_.stream());
  for (Slot& s : up_) {
    if (s.host) cudaFreeHost(s.host);
    if (s.done) cudaEventDestroy(static_cast<cudaEvent_t>(s.done));
  }
  for (void* e : down_done_)
    if (e) cudaEventDestroy(static_cast<cudaEvent_t>(e));
  cudaGetLastError();
}

void* AsyncCopies::event_for(Slot& s) {
  if (!s.done) {
    cudaEvent_t e = nullptr;
    POLYKV_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    s.done = e;
  }
  return s.done;
}

void AsyncCopies::upload(void* dst, const void* src_host, size_t bytes) {
  if (bytes == 0) return;
  Slot& s = up_[n_up_++ % kSlots];
  if (s.done) POLYKV_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(s.done)));  // its last copy landed
  if (s.bytes < bytes) {
    if (s.host) POLYKV_CUDA_CHECK(cudaFreeHost(s.host));
    s.host = nullptr;
    s.bytes = 0;
    const size_t want = bytes < 4096 ? 4096 : bytes * 2;
    const cudaError_t err = cudaMallocHost(&s.host, want);
    if (err != cudaSuccess) {
      cudaGetLastError();
      s.host = nullptr;
      fail("CUDA: cannot allocate ", want, " bytes of page-locked staging memory: ", cudaGetErrorString(err));
    }
    s.bytes = want;
  }
  std::memcpy(s.host, src_host, bytes);
  POLYKV_CUDA_CHECK(cudaMemcpyAsync(dst, s.host, bytes, cudaMemcpyHostToDevice, ctx_.stream()));
  POLYKV_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event_for(s)), ctx_.stream()));
}

uint64_t AsyncCopies::download(void* dst_host, const void* src, size_t bytes) {
  const uint64_t ticket = ++n_down_;
  void*& e = down_done_[ticket % kSlots];
  if (!e) {
    cudaEvent_t ev = nullptr;
    POLYKV_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    e = ev;
  }
  if (bytes > 0) POLYKV_CUDA_CHECK(cudaMemcpyAsync(dst_host, src, bytes, cudaMemcpyDeviceToHost, ctx_.stream()));
  POLYKV_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(e), ctx_.stream()));
  return ticket;
}

void AsyncCopies::wait(uint64_t ticket) {
  if (ticket == 0) return;
  check(ticket <= n_down_ && ticket + kSlots > n_down_, "CUDA: download ticket ", ticket, " is not among the last ",
        kSlots, " (", n_down_, " issued)");
  // Also surfaces faults of the kernels before the copy.
  POLYKV_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(down_done_[ticket % kSlots])));
}

}  // namespace polykv::cuda
