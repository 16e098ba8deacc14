// Integer scores of q8_0 K (backend/cpu/attention_q8.h): the AVX-512 VNNI tile kernel against the
// scalar reference bit for bit on awkward head sizes (an odd block count), row counts and extreme
// values; a row's scores independent of the rows beside it; the prepared query against the q8_0
// reference; the scores within the query's rounding of the float dot; and attention with the integer
// scores against attention_ref on the rounded query (the switch turning them off gives the f32 path).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/attention.h"
#include "backend/cpu/attention_q8.h"
#include "core/fp16.h"
#include "kv/kv_cache.h"
#include "quant/blocks.h"
#include "quant/quant.h"
#include "test_util.h"

namespace polykv {
namespace {

constexpr int kKeys = 32;

// 32 q8_0 K rows of hd values: random, with a few extreme rows (all +-127 at a large scale, zeros,
// a tiny scale), and rows that are the masked keys' zero row.
struct KeyTile {
  std::vector<std::vector<uint8_t>> rows;
  std::vector<const uint8_t*> ptrs;
  KeyTile(int hd, uint32_t seed) {
    const size_t bytes = size_t(hd / 32) * sizeof(BlockQ8_0);
    std::mt19937 rng(seed);
    for (int j = 0; j < kKeys; ++j) {
      std::vector<float> x = test::random_floats(size_t(hd), seed * 97 + uint32_t(j), 3.0f);
      if (j == 3) std::fill(x.begin(), x.end(), 0.0f);
      if (j == 5)
        for (int i = 0; i < hd; ++i) x[size_t(i)] = i % 2 ? 60000.0f : -60000.0f;  // near f16's top
      if (j == 7)
        for (float& v : x) v *= 1e-6f;
      std::vector<uint8_t> r(bytes);
      quantize_row_ref(DType::Q8_0, x.data(), r.data(), hd);
      rows.push_back(std::move(r));
    }
    for (int j = 0; j < kKeys; ++j) ptrs.push_back(j % 11 == 10 ? q8_zero_row() : rows[size_t(j)].data());
  }
};

struct QueryRows {
  std::vector<std::vector<uint8_t>> rows;
  std::vector<const uint8_t*> ptrs;
  std::vector<std::vector<float>> x;
  QueryRows(int hd, int n, uint32_t seed) {
    for (int r = 0; r < n; ++r) {
      std::vector<float> v = test::random_floats(size_t(hd), seed + uint32_t(r), 2.0f);
      if (r == 1)
        for (int i = 0; i < hd; ++i) v[size_t(i)] = i % 3 ? 127.0f : -127.0f;
      std::vector<uint8_t> p(q8_prepared_bytes(hd));
      q8_prepare_query(v.data(), p.data(), hd);
      rows.push_back(std::move(p));
      x.push_back(std::move(v));
    }
    for (auto& r : rows) ptrs.push_back(r.data());
  }
};

TEST(AttentionQ8, PreparedQueryIsTheQ8Reference) {
  for (int hd : {32, 64, 96, 128, 256}) {
    const std::vector<float> x = test::random_floats(size_t(hd), 5, 4.0f);
    std::vector<BlockQ8_0> ref(size_t(hd / 32));
    quantize_row_ref(DType::Q8_0, x.data(), ref.data(), hd);
    std::vector<uint8_t> p(q8_prepared_bytes(hd));
    q8_prepare_query(x.data(), p.data(), hd);
    ASSERT_EQ(0u, p.size() % 64);
    const int nb = hd / 32;
    for (int b = 0; b < nb; ++b) {
      float d;
      int32_t q128;
      std::memcpy(&d, p.data() + 4 * b, 4);
      std::memcpy(&q128, p.data() + 4 * (nb + b), 4);
      EXPECT_EQ(fp16_to_f32(ref[size_t(b)].d), d);
      int32_t sum = 0;
      for (int i = 0; i < 32; ++i) {
        const int8_t v = int8_t(p[size_t(8 * nb + 32 * b + i)]);
        EXPECT_EQ(ref[size_t(b)].qs[i], v);
        EXPECT_GE(v, -127);
        sum += v;
      }
      EXPECT_EQ(128 * sum, q128);
    }
  }
}

TEST(AttentionQ8, Avx512MatchesScalarBitForBit) {
  const Q8ScoreTileFn fast = score_tile_q8_avx512();
  if (!fast) GTEST_SKIP() << "no AVX-512 (VNNI) on this CPU";
  uint32_t seed = 1;
  for (int hd : {32, 64, 96, 128, 160, 256})
    for (int n : {1, 2, 3, 4, 5, 7, 8, 9, 16, 17}) {
      const KeyTile k(hd, seed++);
      const QueryRows q(hd, n, 1000 * seed);
      const size_t stride = 37;  // an odd row stride
      std::vector<float> a(size_t(n) * stride, NAN), b(size_t(n) * stride, NAN);
      score_tile_q8_scalar(k.ptrs.data(), hd, q.ptrs.data(), n, a.data(), stride);
      fast(k.ptrs.data(), hd, q.ptrs.data(), n, b.data(), stride);
      for (int r = 0; r < n; ++r)
        for (int j = 0; j < kKeys; ++j) {
          const float x = a[size_t(r) * stride + size_t(j)], y = b[size_t(r) * stride + size_t(j)];
          ASSERT_EQ(0, std::memcmp(&x, &y, 4)) << "hd " << hd << " rows " << n << " row " << r << " key " << j << ": "
                                               << x << " vs " << y;
          ASSERT_TRUE(std::isfinite(x));
        }
      for (int r = 0; r < n; ++r) EXPECT_EQ(0.0f, a[size_t(r) * stride + 10]) << "the zero row scores 0";
    }
}

// A row's scores do not depend on how many rows share the call or where the row sits among them.
TEST(AttentionQ8, RowScoresIndependentOfTheBatch) {
  std::vector<Q8ScoreTileFn> kernels{score_tile_q8_scalar};
  if (score_tile_q8_avx512()) kernels.push_back(score_tile_q8_avx512());
  const int hd = 128, n = 13;
  const KeyTile k(hd, 77);
  const QueryRows q(hd, n, 88);
  for (Q8ScoreTileFn f : kernels) {
    std::vector<float> all(size_t(n) * kKeys);
    f(k.ptrs.data(), hd, q.ptrs.data(), n, all.data(), kKeys);
    for (int r = 0; r < n; ++r) {
      std::vector<float> one(kKeys);
      f(k.ptrs.data(), hd, q.ptrs.data() + r, 1, one.data(), kKeys);
      EXPECT_EQ(0, std::memcmp(one.data(), all.data() + size_t(r) * kKeys, sizeof(float) * kKeys)) << "row " << r;
    }
  }
}

// The integer score is the float dot of the rounded query with the stored key, up to f32 rounding;
// and it is within the query's rounding (half a step per value) of the exact query's dot.
TEST(AttentionQ8, ScoresAreTheRoundedQueryDot) {
  const int hd = 128, n = 4;
  const KeyTile k(hd, 9);
  const QueryRows q(hd, n, 19);
  std::vector<float> s(size_t(n) * kKeys);
  score_tile_q8_scalar(k.ptrs.data(), hd, q.ptrs.data(), n, s.data(), kKeys);
  std::vector<float> kf(static_cast<size_t>(hd)), qr(static_cast<size_t>(hd));
  std::vector<uint8_t> qb(size_t(hd / 32) * sizeof(BlockQ8_0));
  for (int r = 0; r < n; ++r) {
    quantize_row_ref(DType::Q8_0, q.x[size_t(r)].data(), qb.data(), hd);
    dequantize_row_ref(DType::Q8_0, qb.data(), qr.data(), hd);
    for (int j = 0; j < kKeys; ++j) {
      dequantize_row_ref(DType::Q8_0, k.ptrs[size_t(j)], kf.data(), hd);
      double rounded = 0, exact = 0, mag = 0, bound = 0;
      for (int i = 0; i < hd; ++i) {
        rounded += double(qr[size_t(i)]) * kf[size_t(i)];
        exact += double(q.x[size_t(r)][size_t(i)]) * kf[size_t(i)];
        mag += std::abs(double(qr[size_t(i)]) * kf[size_t(i)]);
        bound += std::abs(double(kf[size_t(i)])) * std::abs(double(q.x[size_t(r)][size_t(i)] - qr[size_t(i)]));
      }
      const double got = s[size_t(r) * kKeys + size_t(j)];
      EXPECT_NEAR(rounded, got, 1e-6 * mag + 1e-30) << "row " << r << " key " << j;
      EXPECT_LE(std::abs(got - exact), bound * 1.001 + 1e-6 * mag + 1e-30) << "row " << r << " key " << j;
    }
  }
}

// Attention with the integer scores (where the ISA has them) matches attention_ref on the rounded
// query; with the switch off it matches the reference on the exact query.
TEST(AttentionQ8, AttentionFollowsTheSwitch) {
  const int hd = 128, n_head_kv = 2, group = 2, n = 300, n_q = 3;
  KvCache kv(KvShape{1, n_head_kv, hd, hd, {}}, KvType::Q8_0, KvType::Turbo3T, n, 64);
  const auto k = test::random_floats(size_t(n) * n_head_kv * hd, 31);
  const auto v = test::random_floats(size_t(n) * n_head_kv * hd, 32);
  const auto q = test::random_floats(size_t(n_q) * n_head_kv * group * hd, 33, 3.0f);
  kv.store(0, 0, n, k.data(), v.data());
  kv.commit(n);
  AttentionParams p;
  p.n_head = n_head_kv * group;
  p.scale = 1.0f / std::sqrt(float(hd));
  ThreadPool pool(2);
  const bool was = attention_q8_enabled();
  for (bool on : {true, false}) {
    set_attention_q8(on);
    const bool q8 = attention_uses_q8_scores(attention_kernels(), KvType::Q8_0, hd);
    EXPECT_EQ(on && attention_kernels().score_q8 != nullptr, q8);
    std::vector<float> fast(size_t(n_q) * p.n_head * hd), ref(fast.size()), other(fast.size());
    attention(p, kv.view(0), n - n_q, n_q, q.data(), fast.data(), pool);
    attention_ref(p, kv.view(0), n - n_q, n_q, q.data(), ref.data(), q8);
    attention_ref(p, kv.view(0), n - n_q, n_q, q.data(), other.data(), !q8);
    double worst = 0, worst_other = 0, scale = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      worst = std::max(worst, double(std::abs(fast[i] - ref[i])));
      worst_other = std::max(worst_other, double(std::abs(fast[i] - other[i])));
      scale = std::max(scale, double(std::abs(ref[i])));
    }
    EXPECT_LE(worst, 1e-4 * scale) << "switch " << on;
    if (attention_kernels().score_q8) EXPECT_GT(worst_other, worst) << "switch " << on << ": the other reference fits as well";
  }
  set_attention_q8(was);
}

}  // namespace
}  // namespace polykv
