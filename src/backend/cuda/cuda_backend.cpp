// Placeholder until the CUDA backend lands: the device is detected, the backend refused.
#include "backend/cuda/cuda_backend.h"

#include <cuda_runtime.h>

#include "core/error.h"

namespace polykv {

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

std::unique_ptr<Backend> make_cuda_backend(int device) {
  fail("the CUDA backend is not implemented yet (device ", device, ")");
}

}  // namespace polykv
