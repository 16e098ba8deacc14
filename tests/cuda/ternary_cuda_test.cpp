// Without POLYKV_CUDA_TERNARY=1 (its kernels are not yet validated on a GPU) the CUDA backend must refuse a
// ternary matrix at upload with a clear Error naming the type and the way out (--device cpu), never fail later
// inside a step.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/error.h"
#include "cuda_test_util.h"

namespace polykv {
namespace {

TEST(TernaryCuda, UploadIsRefusedClearly) {
  POLYKV_REQUIRE_GPU();
  auto be = make_backend({"cuda", 0});
  for (DType t : {DType::TQ1_0, DType::TQ2_0, DType::PTQ1_0}) {
    const int64_t n_in = 256, n_out = 4;
    std::vector<uint8_t> bytes(row_bytes(t, n_in) * size_t(n_out), 0);
    const WeightMatrix w{t, bytes.data(), n_in, n_out, row_bytes(t, n_in)};
    try {
      be->upload_matrix(w);
      ADD_FAILURE() << "no error for " << dtype_name(t);
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(dtype_name(t)), std::string::npos) << msg;
      EXPECT_NE(msg.find("--device cpu"), std::string::npos) << msg;
    }
  }
}

}  // namespace
}  // namespace polykv
