// The packed trellis piece decoder of the CUDA decode attention (backend/cuda/kv_decode_trellis.cuh,
// __host__ __device__ code compiled here by g++) against decode8s (kv_decode_scaled.cuh, itself checked
// against decode8 and the CPU's decoders): for every KV type (the trellis types take the packed path, the
// others forward), every head size the type allows and every piece of random rows stored 2 mod 4 (the
// pool's alignment), the values and the scale must be bit-identical, and reading a row must not depend on
// bytes past it. Rows include all-ones and all-zeros bit patterns of the trellis and index bytes (the
// packing's extreme offsets).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/kv_decode_trellis.cuh"
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

// Checks every piece of the row at a + 2 (b + 2: the same bytes, other junk after them).
void check_row(KvType t, int hd, const std::vector<float>& lut, const std::vector<uint8_t>& a,
               const std::vector<uint8_t>& b, const std::string& what) {
  for (int c = 0; c < hd / 8; ++c)
    cuda::kv_type_dispatch(t, [&](auto tag) {
      constexpr KvType T = decltype(tag)::value;
      float ref[8], va[8], vb[8];
      const float sr = cuda::decode8s<T>(a.data() + 2, c, hd, lut.data(), ref);
      const float sa = cuda::decode8s_packed<T>(a.data() + 2, c, hd, lut.data(), va);
      const float sb = cuda::decode8s_packed<T>(b.data() + 2, c, hd, lut.data(), vb);
      const std::string where = std::string(kv_type_name(t)) + " hd " + std::to_string(hd) + " " + what +
                                " piece " + std::to_string(c);
      ASSERT_EQ(sa, sr) << where << " scale";
      ASSERT_EQ(sb, sr) << where << " scale, other bytes after the row";
      for (int k = 0; k < 8; ++k) {
        ASSERT_EQ(va[k], ref[k]) << where << " value " << k;
        ASSERT_EQ(vb[k], ref[k]) << where << " value " << k << ", other bytes after the row";
      }
    });
}

TEST(CudaKvDecodeTrellis, PackedIsDecode8s) {
  const cuda::KvDecodeTables tab = cuda::make_kv_decode_tables();
  int checked = 0, trellis = 0;
  for (KvType t : kAllKvTypes)
    for (int hd : {32, 64, 128, 256, 512}) {
      if (!head_dim_ok(t, hd)) continue;
      const auto lut = lut_of(t, hd, tab);
      const size_t bytes = kv_head_bytes(t, hd);
      for (uint32_t seed = 1; seed <= 6; ++seed) {
        std::vector<uint8_t> a(bytes + 16, 0x00), b(bytes + 16, 0xFF);
        if (seed <= 4) {
          auto x = test::random_floats(size_t(hd), seed * 613 + uint32_t(hd) + 17 * uint32_t(t));
          std::mt19937 rng(seed);
          for (int k = 0; k < 3; ++k) x[rng() % unsigned(hd)] *= 8.0f;
          kv_type_ops(t).quantize_head(x.data(), a.data() + 2, hd);
        } else if (cuda::kv_trellis_bits(t) != 0) {
          // Raw bit patterns past the norms: every trellis window and index bit set (seed 5) or random bytes
          // (seed 6); the norms stay those of a quantized row.
          auto x = test::random_floats(size_t(hd), seed);
          kv_type_ops(t).quantize_head(x.data(), a.data() + 2, hd);
          const int n = cuda::turbo_group_of(hd), rb = 2 + n * cuda::kv_trellis_bits(t) / 8;
          std::mt19937 rng(seed);
          for (int g = 0; g < hd / n; ++g)
            for (int k = 2; k < rb; ++k) a[2 + size_t(g * rb + k)] = seed == 5 ? 0xFF : uint8_t(rng());
        } else {
          continue;
        }
        std::memcpy(b.data() + 2, a.data() + 2, bytes);
        check_row(t, hd, lut, a, b, "seed " + std::to_string(seed));
        if (::testing::Test::HasFatalFailure()) return;
        ++checked;
        if (cuda::kv_trellis_bits(t) != 0) ++trellis;
      }
    }
  EXPECT_EQ(trellis, 3 * 5 * 6);
  EXPECT_EQ(checked, 8 * 5 * 4 + 3 * 5 * 6);
}

TEST(CudaKvDecodeTrellis, ConstantRowBytesAreKvHeadBytes) {
  int checked = 0;
  for (KvType t : kAllKvTypes)
    for (int hd : {32, 64, 128, 256, 512}) {
      if (!head_dim_ok(t, hd)) continue;
      EXPECT_EQ(size_t(cuda::kv_row_bytes_const(t, hd)), kv_head_bytes(t, hd)) << kv_type_name(t) << " hd " << hd;
      ++checked;
    }
  EXPECT_EQ(checked, 11 * 5);
  static_assert(cuda::kv_row_bytes_const(KvType::Turbo3T, 128) == 50 && cuda::kv_row_bytes_const(KvType::Q8_0, 128) == 136);
}

}  // namespace
}  // namespace polykv
