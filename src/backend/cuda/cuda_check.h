// Error checks of CUDA runtime and cuBLAS calls: a failed call throws polykv::Error naming the call,
// the file and line and CUDA's message. Kernel launches are followed by POLYKV_CUDA_LAUNCHED().
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "backend/cuda/cublas_loader.h"

#include "core/error.h"

#define POLYKV_CUDA_CHECK(call)                                                                      \
  do {                                                                                               \
    const cudaError_t polykv_err_ = (call);                                                          \
    if (polykv_err_ != cudaSuccess)                                                                  \
      ::polykv::fail("CUDA: ", #call, " failed at ", __FILE__, ":", __LINE__, ": ",                   \
                     cudaGetErrorString(polykv_err_));                                               \
  } while (0)

#define POLYKV_CUBLAS_CHECK(call)                                                                    \
  do {                                                                                               \
    const cublasStatus_t polykv_st_ = (call);                                                        \
    if (polykv_st_ != CUBLAS_STATUS_SUCCESS)                                                         \
      ::polykv::fail("cuBLAS: ", #call, " failed at ", __FILE__, ":", __LINE__, ": ",                 \
                     ::polykv::cuda::blas::status_string(polykv_st_));                                    \
  } while (0)

// After a kernel launch: reports a bad launch configuration at once (not a fault inside the kernel,
// which surfaces at the next synchronizing call).
#define POLYKV_CUDA_LAUNCHED() POLYKV_CUDA_CHECK(cudaGetLastError())
