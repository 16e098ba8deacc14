// The CUDA backend (backend/backend.h): device memory, the kernels of backend/cuda, cuBLAS for
// prefill, the KV pool in device memory. Built only with POLYKV_CUDA.
#pragma once
#include <memory>

#include "backend/backend.h"

namespace polykv {

// GPUs visible to this process (0 when the driver is missing or no device is present; never throws).
int cuda_device_count();

// A backend on CUDA device `device`; throws Error if it is absent. batch_invariant: every row of a step
// gets the bits it would get in a step of its own (BackendOptions::batch_invariant; docs/CUDA_SPEC.md).
std::unique_ptr<Backend> make_cuda_backend(int device, bool batch_invariant = false);

}  // namespace polykv
