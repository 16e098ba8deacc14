// cuBLAS is loaded on first use (backend/cuda/cublas_loader.h), not at process start: a process that
// has not loaded it through the loader has no libcublas mapped. No GPU needed.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "backend/cuda/cublas_loader.h"

namespace polykv {
namespace {

bool cublas_mapped() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find("libcublas") != std::string::npos) return true;
  return false;
}

TEST(CublasLoader, MappedOnlyOnceLoaded) {
  // Run alone (ctest runs each test in its own process), nothing has loaded it yet; after other CUDA
  // tests in the same process it is loaded and mapped.
  EXPECT_EQ(cublas_mapped(), cuda::blas::loaded());
}

// The loader finds the toolkit's library (no GPU needed to load it) and its functions work.
TEST(CublasLoader, LoadsTheToolkitsLibraryOnFirstUse) {
  const char* ok = cuda::blas::status_string(CUBLAS_STATUS_SUCCESS);
  ASSERT_NE(ok, nullptr);
  EXPECT_NE(std::string(ok), "");
  EXPECT_TRUE(cuda::blas::loaded());
  EXPECT_TRUE(cublas_mapped());
}

}  // namespace
}  // namespace polykv
