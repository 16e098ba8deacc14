// Kernel launches of the CUDA matmul with programmatic dependent launch (PDL, sm_90): a kernel
// launched with `pdl` may start while the previous kernel of the stream still runs; it must call
// wait_for_previous_grid() before it reads anything that kernel writes (or writes anything it reads).
// The mat-vec kernels issue their weight copies first (weights are never written by the kernel
// before them) and wait only before reading the activations, so their start-up and first loads
// overlap the activation kernel. Without PDL (older GPUs, or set_matvec_pdl(false)) the wait is a
// no-op and launches are ordinary. Included by the .cu files only.
#pragma once
#include <utility>

#include "backend/cuda/cuda_check.h"

namespace polykv::cuda {

// Blocks until the previous grid of the stream has completed and its writes are visible (a no-op
// when this grid was not launched with PDL or before sm_90).
__device__ __forceinline__ void wait_for_previous_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the next grid of the stream (if launched with PDL) start before this one completes; it still
// waits for this grid's completion in wait_for_previous_grid().
__device__ __forceinline__ void allow_next_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

template <class... KArgs, class... Args>
void launch_kernel(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, bool pdl,
                   Args&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  POLYKV_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}

}  // namespace polykv::cuda
