#include "backend/cuda/cublas_loader.h"

#include <dlfcn.h>

#include <atomic>
#include <string>
#include <string_view>

#include "core/error.h"

#ifndef POLYKV_CUBLAS_SONAME
#define POLYKV_CUBLAS_SONAME "libcublas.so.13"
#endif
#ifndef POLYKV_CUBLAS_DIR
#define POLYKV_CUBLAS_DIR ""
#endif

namespace polykv::cuda::blas {
namespace {

// The exported C function (cublas_api.h also declares a C++ overload for old compute-type enums).
using GemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                  const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                  cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);

struct Api {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  GemmEx gemm_ex = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
};

std::atomic<bool> g_loaded{false};

template <class F>
void bind(void* lib, const char* name, F& f) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  check(f != nullptr, "cuBLAS: ", POLYKV_CUBLAS_SONAME, " has no symbol ", name);
}

// The soname through the loader's search (LD_LIBRARY_PATH, ld.so.cache), then the CUDA toolkit's
// library folder this build was configured with.
Api load() {
  std::string tried;
  void* lib = nullptr;
  std::string candidates[2] = {POLYKV_CUBLAS_SONAME};
  if (std::string_view(POLYKV_CUBLAS_DIR).size() > 0) candidates[1] = std::string(POLYKV_CUBLAS_DIR) + "/" + POLYKV_CUBLAS_SONAME;
  for (const std::string& path : candidates) {
    if (path.empty()) continue;
    lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr) break;
    const char* why = dlerror();
    tried += std::string(tried.empty() ? "" : "; ") + (why != nullptr ? why : path);
  }
  check(lib != nullptr, "cuBLAS could not be loaded (", tried,
        "): the CUDA backend needs the CUDA 13 toolkit's cuBLAS on the library path (LD_LIBRARY_PATH)");
  Api a;  // the library stays loaded for the life of the process
  bind(lib, "cublasCreate_v2", a.create);
  bind(lib, "cublasDestroy_v2", a.destroy);
  bind(lib, "cublasSetStream_v2", a.set_stream);
  bind(lib, "cublasGemmEx", a.gemm_ex);
  bind(lib, "cublasGetStatusString", a.status_string);
  g_loaded.store(true);
  return a;
}

// Loaded once (a thread-safe static); a load that throws is tried again by the next call.
const Api& api() {
  static const Api a = load();
  return a;
}

}  // namespace

cublasStatus_t create(cublasHandle_t* handle) { return api().create(handle); }
cublasStatus_t destroy(cublasHandle_t handle) { return api().destroy(handle); }
cublasStatus_t set_stream(cublasHandle_t handle, cudaStream_t stream) { return api().set_stream(handle, stream); }
cublasStatus_t gemm_ex(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                       const void* alpha, const void* a, cudaDataType a_type, int lda, const void* b,
                       cudaDataType b_type, int ldb, const void* beta, void* c, cudaDataType c_type, int ldc,
                       cublasComputeType_t compute, cublasGemmAlgo_t algo) {
  return api().gemm_ex(handle, transa, transb, m, n, k, alpha, a, a_type, lda, b, b_type, ldb, beta, c, c_type, ldc,
                       compute, algo);
}
const char* status_string(cublasStatus_t status) { return api().status_string(status); }
bool loaded() { return g_loaded.load(); }

}  // namespace polykv::cuda::blas
