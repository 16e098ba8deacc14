// The turbo sign table as the GPU encoder reads it (kv_encode.cuh TurboTables::sign_neg, one bit per
// value, 2026-12-01c): every group size's bits are the CPU's sign table, and the encoder's default is
// the current encoder (POLYKV_CUDA_KV_VITERBI=old selects the previous one).
#include <gtest/gtest.h>

#include <cstdlib>

#include "backend/cuda/kv_encode.cuh"
#include "quant/turbo_internal.h"

namespace polykv {
namespace {

TEST(CudaKvEncodeSignBits, BitsAreTheCpuSignTable) {
  for (KvType t : {KvType::Turbo3, KvType::Turbo3T, KvType::Turbo4T})
    for (int hd : {32, 64, 128, 256}) {
      const cuda::enc::SideParams p = cuda::enc::make_side_params(t, hd);
      const int n = p.unit_values;
      const float* sign = turbo::detail::sign_table(n);
      int neg = 0;
      for (int i = 0; i < 128; ++i) {
        const bool bit = (p.tab.sign_neg[i >> 5] >> (i & 31)) & 1u;
        EXPECT_EQ(bit, i < n && sign[i] < 0.0f) << kv_type_name(t) << " hd " << hd << " i " << i;
        neg += bit;
      }
      EXPECT_GT(neg, n / 4) << kv_type_name(t) << " hd " << hd;
      EXPECT_LT(neg, 3 * n / 4) << kv_type_name(t) << " hd " << hd;
      if (std::getenv("POLYKV_CUDA_KV_VITERBI") == nullptr) EXPECT_FALSE(is_legacy(p.tab));
    }
}

}  // namespace
}  // namespace polykv
