// TEMP — DROP WHEN MERGING: stand-ins for the kernel launchers other helpers are writing
// (matmul_cuda.h: matmul, matvec, dequantize_rows; kv_cuda.h: kv_store, attention), so that the CUDA
// backend links before they land. Weak, so a real definition linked beside them wins; each throws,
// so a build that still uses one fails loudly instead of computing nothing.
#include "backend/cuda/kv_cuda.h"

namespace polykv::cuda {

__attribute__((weak)) void attention(const KvLayerDevice&, const AttentionParams&, const AttentionBatchDevice&,
                                     const float*, float*, CudaContext&) {
  fail("kernel_stubs_TEMP: cuda::attention is not linked in this build");
}

}  // namespace polykv::cuda
