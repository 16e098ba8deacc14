#include "backend/cuda/cuda_kv_memory.h"

#include "backend/cuda/gdn_cuda.h"

namespace polykv::cuda {

CudaKvMemory::CudaKvMemory(int device, cudaStream_t stream)
    : device_(device), stream_(stream), name_("cuda:" + std::to_string(device)) {}

void* CudaKvMemory::allocate(size_t bytes) {
  POLYKV_CUDA_CHECK(cudaSetDevice(device_));
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes == 0 ? 1 : bytes);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // an out-of-memory answer is not sticky, but clear it for the next check
    return nullptr;      // the caller (KvBlockStore) reports how much it asked for
  }
  POLYKV_CUDA_CHECK(err);
  return p;
}

void CudaKvMemory::release(void* p) {
  if (!p) return;
  // A destructor path (KvBlockStore's): report nothing, never throw.
  if (cudaSetDevice(device_) != cudaSuccess || cudaFree(p) != cudaSuccess) cudaGetLastError();
}

void CudaKvMemory::copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  POLYKV_CUDA_CHECK(cudaSetDevice(device_));
  POLYKV_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
}

void CudaKvMemory::zero_floats(float* p, size_t n) {
  if (n == 0) return;
  POLYKV_CUDA_CHECK(cudaSetDevice(device_));
  POLYKV_CUDA_CHECK(cudaMemsetAsync(p, 0, n * sizeof(float), stream_));
}

void CudaKvMemory::replay_recurrent(const RecurrentShape& shape, const float* from, float* to, const float* log,
                                    int n_rows) {
  POLYKV_CUDA_CHECK(cudaSetDevice(device_));
  gdn_replay(gdn_shape(shape), from, to, log, n_rows, stream_);
}

}  // namespace polykv::cuda
