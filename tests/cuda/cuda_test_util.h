// Helpers of the GPU tests: every test starts with POLYKV_REQUIRE_GPU(), which skips it cleanly on a
// machine without a GPU (CI), so the suite stays green there and runs fully on the GPU machine
// (scripts/gpu-test.sh).
#pragma once
#include <gtest/gtest.h>

#include "backend/cuda/cuda_backend.h"

#define POLYKV_REQUIRE_GPU()                                  \
  do {                                                        \
    if (::polykv::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU visible"; \
  } while (0)
