// cuBLAS, loaded on first use (dlopen) instead of at program start. libcublasLt's static
// initializers cost ~0.6 s of CPU and page faults in every process that links it (perf, 2026-12-02:
// 68% of a test process's start in libcublasLt's init), so a CUDA build paid them in every `polykv`
// command and every test process, with or without a GPU; now only the first CudaContext pays them.
// The functions have cuBLAS's own signatures (cublas_v2.h's types); a library that cannot be loaded
// throws polykv::Error naming what was tried.
#pragma once
#include <cublas_v2.h>

namespace polykv::cuda::blas {

cublasStatus_t create(cublasHandle_t* handle);
cublasStatus_t destroy(cublasHandle_t handle);
cublasStatus_t set_stream(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t gemm_ex(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                       const void* alpha, const void* a, cudaDataType a_type, int lda, const void* b,
                       cudaDataType b_type, int ldb, const void* beta, void* c, cudaDataType c_type, int ldc,
                       cublasComputeType_t compute, cublasGemmAlgo_t algo);
const char* status_string(cublasStatus_t status);

// Whether the library is loaded (tests: a process that never made a CudaContext has not loaded it).
bool loaded();

}  // namespace polykv::cuda::blas
