// The pair-table piece decoder of the CUDA decode attention (backend/cuda/kv_decode_pairs.cuh, __host__
// __device__ code compiled here by g++) against decode8s (kv_decode_scaled.cuh, itself checked against
// decode8 and the CPU's decoders): for every KV type (turbo and trellis types take the pair path except
// turbo4t, the others forward), every head size the type allows and every piece of random rows stored
// 2 mod 4 (the pool's alignment), the values and the scale must be bit-identical, and reading a row must
// not depend on bytes past it. Rows include all-ones and random bit patterns of the index and trellis
// bytes (every pair offset's extremes). The table itself: every entry against scaled_lut_entry.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/kv_decode_pairs.cuh"
#include "core/error.h"
#include "core/fp16.h"
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

struct Tables {
  std::vector<float> lut, plut;  // scaled_lut_entry table; pair table as [2 * i] = a, [2 * i + 1] = b
};

Tables tables_of(KvType t, int hd, const cuda::KvDecodeTables& tab) {
  Tables r;
  r.lut.resize(cuda::kScaledLutSize);
  const float* lv = cuda::kv_levels(tab, t, hd);
  for (int i = 0; i < cuda::kScaledLutSize; ++i) r.lut[size_t(i)] = cuda::scaled_lut_entry(t, lv, tab.subset_word, i);
  r.plut.assign(2 * size_t(std::max(1, cuda::pair_lut_size(t))), -12345.0f);
  for (int i = 0; i < cuda::pair_lut_size(t); ++i)
    cuda::pair_lut_entry(t, lv, tab.subset_word, i, r.plut[2 * size_t(i)], r.plut[2 * size_t(i) + 1]);
  return r;
}

void check_row(KvType t, int hd, const Tables& tb, const std::vector<uint8_t>& a, const std::vector<uint8_t>& b,
               const std::string& what) {
  for (int c = 0; c < hd / 8; ++c)
    cuda::kv_type_dispatch(t, [&](auto tag) {
      constexpr KvType T = decltype(tag)::value;
      float ref[8], va[8], vb[8];
      const float sr = cuda::decode8s<T>(a.data() + 2, c, hd, tb.lut.data(), ref);
      const float sa = cuda::decode8s_pairs<T>(a.data() + 2, c, hd, tb.lut.data(), tb.plut.data(), va);
      const float sb = cuda::decode8s_pairs<T>(b.data() + 2, c, hd, tb.lut.data(), tb.plut.data(), vb);
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

TEST(CudaKvDecodePairs, PairsAreDecode8s) {
  const cuda::KvDecodeTables tab = cuda::make_kv_decode_tables();
  int checked = 0, paired = 0;
  for (KvType t : kAllKvTypes)
    for (int hd : {32, 64, 128, 256, 512}) {
      if (!head_dim_ok(t, hd)) continue;
      const Tables tb = tables_of(t, hd, tab);
      const size_t bytes = kv_head_bytes(t, hd);
      const bool rotated = cuda::kv_trellis_bits(t) != 0 || cuda::kv_turbo_bits(t) != 0;
      for (uint32_t seed = 1; seed <= 6; ++seed) {
        std::vector<uint8_t> a(bytes + 16, 0x00), b(bytes + 16, 0xFF);
        auto x = test::random_floats(size_t(hd), seed * 911 + uint32_t(hd) + 31 * uint32_t(t));
        std::mt19937 rng(seed);
        for (int k = 0; k < 3; ++k) x[rng() % unsigned(hd)] *= 8.0f;
        kv_type_ops(t).quantize_head(x.data(), a.data() + 2, hd);
        if (seed >= 5) {
          if (!rotated) continue;
          // Raw bit patterns past each group's norm: all ones (seed 5) or random bytes (seed 6).
          const int n = cuda::turbo_group_of(hd);
          const int bits = cuda::kv_trellis_bits(t) ? cuda::kv_trellis_bits(t) : cuda::kv_turbo_bits(t);
          const int rb = 2 + n * bits / 8;
          for (int g = 0; g < hd / n; ++g)
            for (int k = 2; k < rb; ++k) a[2 + size_t(g * rb + k)] = seed == 5 ? 0xFF : uint8_t(rng());
        }
        std::memcpy(b.data() + 2, a.data() + 2, bytes);
        check_row(t, hd, tb, a, b, "seed " + std::to_string(seed));
        if (::testing::Test::HasFatalFailure()) return;
        ++checked;
        if (cuda::pair_lut_size(t) != 0) ++paired;
      }
    }
  // 5 types with pair tables (turbo2/3/4, turbo2t/3t) x 5 head sizes x 6 rows; turbo4t 5 x 6 rows
  // (packed); 5 other types x 5 head sizes x 4 rows (f32 and the ones without levels).
  EXPECT_EQ(paired, 5 * 5 * 6);
  EXPECT_EQ(checked, 6 * 5 * 6 + 5 * 5 * 4);
}

TEST(CudaKvDecodePairs, TableSizesAndEntries) {
  EXPECT_EQ(cuda::pair_lut_size(KvType::Turbo3T), 512);
  EXPECT_EQ(cuda::pair_lut_size(KvType::Turbo2T), 128);
  EXPECT_EQ(cuda::pair_lut_size(KvType::Turbo4T), 0);
  EXPECT_EQ(cuda::pair_lut_size(KvType::Turbo3), 64);
  EXPECT_EQ(cuda::pair_lut_size(KvType::Turbo4), 256);
  EXPECT_EQ(cuda::pair_lut_size(KvType::Q8_0), 0);
  int n = 0;
  for (KvType t : kAllKvTypes) {
    EXPECT_LE(cuda::pair_lut_size(t), cuda::kPairLutMax);
    n += cuda::pair_lut_size(t) > 0 ? 1 : 0;
  }
  EXPECT_EQ(n, 5);
  // Turbo3t: entry y | z << 5 holds the levels of windows y & 15 and y >> 1 with indices z & 3 and z >> 2.
  const cuda::KvDecodeTables tab = cuda::make_kv_decode_tables();
  const float* lv = cuda::kv_levels(tab, KvType::Turbo3T, 128);
  for (int y = 0; y < 32; ++y)
    for (int z = 0; z < 16; ++z) {
      float a, b;
      cuda::pair_lut_entry(KvType::Turbo3T, lv, tab.subset_word, y | z << 5, a, b);
      const int w0 = y & 15, w1 = y >> 1, j0 = z & 3, j1 = z >> 2;
      EXPECT_EQ(a, lv[((tab.subset_word >> (2 * w0)) & 3u) + 4 * j0]) << y << " " << z;
      EXPECT_EQ(b, lv[((tab.subset_word >> (2 * w1)) & 3u) + 4 * j1]) << y << " " << z;
    }
}

// The tensor-core decode kernel keeps pair tables of f16 pairs (attention_cuda_decode_tc.cuh): its offsets
// (L = 2) are the float table's (L = 3) halved for every piece's bits, and every entry of every pair table is
// exact in f16 (the levels are f16 values, quant/turbo.h), so the f16 table holds the same values.
template <int M>
void expect_f16_offsets_halve(uint32_t x, uint32_t js) {
  EXPECT_EQ((2 * cuda::trellis_pair_off<1, M, 2>(x, js)), (cuda::trellis_pair_off<1, M, 3>(x, js))) << x << " " << js;
  EXPECT_EQ((2 * cuda::trellis_pair_off<2, M, 2>(x, js)), (cuda::trellis_pair_off<2, M, 3>(x, js))) << x << " " << js;
  EXPECT_EQ((2 * cuda::turbo_pair_off<2, M, 2>(x)), (cuda::turbo_pair_off<2, M, 3>(x))) << x;
  EXPECT_EQ((2 * cuda::turbo_pair_off<3, M, 2>(x)), (cuda::turbo_pair_off<3, M, 3>(x))) << x;
  EXPECT_EQ((2 * cuda::turbo_pair_off<4, M, 2>(x)), (cuda::turbo_pair_off<4, M, 3>(x))) << x;
}

TEST(CudaKvDecodePairs, HalfTablesOffsetsAndExactEntries) {
  std::mt19937 rng(7);
  for (int n = 0; n < 2000; ++n) {
    const uint32_t x = n < 2 ? (n ? 0xFFFFFFFFu : 0u) : uint32_t(rng()), js = n < 2 ? x : uint32_t(rng());
    expect_f16_offsets_halve<0>(x & 0x7FF, js & 0xFFFF);
    expect_f16_offsets_halve<1>(x & 0x7FF, js & 0xFFFF);
    expect_f16_offsets_halve<2>(x & 0x7FF, js & 0xFFFF);
    expect_f16_offsets_halve<3>(x & 0x7FF, js & 0xFFFF);
  }
  const cuda::KvDecodeTables tab = cuda::make_kv_decode_tables();
  for (KvType t : kAllKvTypes)
    for (int hd : {64, 128, 256})
      if (cuda::pair_lut_size(t) > 0 && head_dim_ok(t, hd)) {
        const Tables tb = tables_of(t, hd, tab);
        for (float v : tb.plut)
          EXPECT_EQ(fp16_to_f32(f32_to_fp16(v)), v) << kv_type_name(t) << " hd " << hd;
      }
}

}  // namespace
}  // namespace polykv
