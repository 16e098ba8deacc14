// The scaled piece decoders of the CUDA decode attention (backend/cuda/kv_decode_scaled.cuh,
// __host__ __device__ code compiled here by g++) against decode8 (kv_decode.cuh, itself checked
// against the CPU's decoders by cuda_kv_decode_test.cpp): for every KV type, every head size the
// type allows and every piece of random rows stored 2 mod 4 (the pool's alignment), v[k] * scale
// must be bit-identical to decode8's value, and reading a row must not depend on bytes past it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/kv_decode_scaled.cuh"
#include "core/error.h"
#include "kv/kv_type.h"
#include "test_util.h"

namespace polykv {
namespace {

bool head_dim_ok(KvType t, int hd) {
  try {
    check_kv_head_dim(t, hd);
    return true;
  } catch (const Error&) {
    return false;
  }
}

std::vector<float> lut_of(KvType t, int hd, const cuda::KvDecodeTables& tab) {
  std::vector<float> lut(cuda::kScaledLutSize);
  const float* lv = cuda::kv_levels(tab, t, hd);
  for (int i = 0; i < cuda::kScaledLutSize; ++i) lut[size_t(i)] = cuda::scaled_lut_entry(t, lv, tab.subset_word, i);
  return lut;
}

TEST(CudaKvDecodeScaled, TimesScaleIsDecode8) {
  const cuda::KvDecodeTables tab = cuda::make_kv_decode_tables();
  int checked = 0;
  for (KvType t : kAllKvTypes)
    for (int hd : {32, 64, 128, 256, 512}) {
      if (!head_dim_ok(t, hd)) continue;
      const auto lut = lut_of(t, hd, tab);
      const float* lv = cuda::kv_levels(tab, t, hd);
      for (uint32_t seed = 1; seed <= 4; ++seed) {
        auto x = test::random_floats(size_t(hd), seed * 977 + uint32_t(hd) + 31 * uint32_t(t));
        std::mt19937 rng(seed);
        for (int k = 0; k < 3; ++k) x[rng() % unsigned(hd)] *= 8.0f;  // blocks of different scales
        const size_t bytes = kv_head_bytes(t, hd);
        // Two copies of the row, 2 mod 4, followed by different junk: the decode must not differ.
        std::vector<uint8_t> a(bytes + 16, 0x00), b(bytes + 16, 0xFF);
        kv_type_ops(t).quantize_head(x.data(), a.data() + 2, hd);
        std::memcpy(b.data() + 2, a.data() + 2, bytes);
        for (int c = 0; c < hd / 8; ++c) {
          float ref[8], va[8], vb[8];
          cuda::kv_type_dispatch(t, [&](auto tag) {
            constexpr KvType T = decltype(tag)::value;
            cuda::decode8<T>(a.data() + 2, c, hd, lv, tab.subset_word, ref);
            const float sa = cuda::decode8s<T>(a.data() + 2, c, hd, lut.data(), va);
            const float sb = cuda::decode8s<T>(b.data() + 2, c, hd, lut.data(), vb);
            for (int k = 0; k < 8; ++k) {
              const std::string what = std::string(kv_type_name(t)) + " hd " + std::to_string(hd) + " piece " +
                                       std::to_string(c) + " value " + std::to_string(k);
              ASSERT_EQ(va[k] * sa, ref[k]) << what << " (v " << va[k] << " scale " << sa << ")";
              ASSERT_EQ(vb[k] * sb, ref[k]) << what << " with other bytes after the row";
            }
          });
        }
        ++checked;
      }
    }
  EXPECT_EQ(checked, 4 * 11 * 5);
}

}  // namespace
}  // namespace polykv
