// The tile kernels of attention (backend/cpu/attention_tile.h): the best kernel for this CPU
// against the scalar reference, on awkward row, key and head sizes; every row's results bit-identical
// whatever the rows batched with it (the invariance attention relies on).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/attention_tile.h"
#include "test_util.h"

namespace polykv {
namespace {

TEST(AttentionTile, AccumulateMatchesScalar) {
  const AccumulateTileFn fast = accumulate_tile_kernel();
  for (int hdv : {16, 32, 48, 64, 80, 128, 136, 256})
    for (int n_rows : {1, 2, 3, 4, 5, 7, 8, 13})
      for (int n_keys : {1, 3, 4, 17, 32}) {
        const size_t w_stride = 33, acc_stride = size_t(hdv) + 5;
        const auto v = test::random_floats(size_t(n_keys) * hdv, uint32_t(hdv + n_keys), 2.0f);
        const auto w = test::random_floats(size_t(n_rows) * w_stride, uint32_t(7 * n_rows + n_keys));
        const auto acc0 = test::random_floats(size_t(n_rows) * acc_stride, uint32_t(11 + hdv));
        std::vector<float> a_fast = acc0, a_ref = acc0;
        fast(v.data(), n_keys, hdv, w.data(), w_stride, n_rows, a_fast.data(), acc_stride);
        accumulate_tile_scalar(v.data(), n_keys, hdv, w.data(), w_stride, n_rows, a_ref.data(), acc_stride);
        for (int r = 0; r < n_rows; ++r)
          for (size_t i = 0; i < acc_stride; ++i) {
            const size_t at = size_t(r) * acc_stride + i;
            if (i >= size_t(hdv)) {  // the padding between rows is not touched
              ASSERT_EQ(a_fast[at], acc0[at]);
              continue;
            }
            ASSERT_NEAR(a_fast[at], a_ref[at], 1e-5 * (1 + n_keys) * (1 + std::abs(a_ref[at])))
                << "hdv " << hdv << " rows " << n_rows << " keys " << n_keys;
          }
      }
}

TEST(AttentionTile, ScoresMatchScalar) {
  const ScoreTileFn fast = score_tile_kernel();
  for (int hd : {8, 16, 24, 64, 100, 128, 256})
    for (int n_rows : {1, 3, 4, 5, 8, 13})
      for (int n_keys : {1, 2, 4, 7, 16, 32}) {
        const auto k = test::random_floats(size_t(n_keys) * hd, uint32_t(hd * 3 + n_keys), 2.0f);
        const auto q = test::random_floats(size_t(n_rows) * (hd + 3), uint32_t(n_rows + hd));
        std::vector<const float*> rows;
        for (int r = 0; r < n_rows; ++r) rows.push_back(q.data() + size_t(r) * (hd + 3));
        const size_t s_stride = 32;
        std::vector<float> s_fast(size_t(n_rows) * s_stride, -1.0f), s_ref(size_t(n_rows) * s_stride, -1.0f);
        fast(k.data(), n_keys, hd, rows.data(), n_rows, s_fast.data(), s_stride);
        score_tile_scalar(k.data(), n_keys, hd, rows.data(), n_rows, s_ref.data(), s_stride);
        for (size_t i = 0; i < s_ref.size(); ++i)
          ASSERT_NEAR(s_fast[i], s_ref[i], 1e-4 * std::sqrt(double(hd)) * 2)
              << "hd " << hd << " rows " << n_rows << " keys " << n_keys << " at " << i;
      }
}

}  // namespace
}  // namespace polykv

namespace polykv {
namespace {

// The invariance attention relies on (attention_tile.h): a row's results do not depend on how
// many rows share the call, where the row sits among them, or (scores) on how many keys follow.
TEST(AttentionTile, RowsAreIndependentOfTheirBatch) {
  struct Set {
    const char* name;
    ScoreTileFn score;
    AccumulateTileFn acc;
    SoftmaxTileFn softmax;
  };
  const Set sets[] = {{"best", score_tile_kernel(), accumulate_tile_kernel(), softmax_tile_kernel()},
                      {"scalar", score_tile_scalar, accumulate_tile_scalar, softmax_tile_scalar}};
  constexpr int kKeys = kSoftmaxKeys, kRows = 13;
  for (const Set& set : sets)
    for (int hd : {64, 80, 128}) {
      const auto k = test::random_floats(size_t(kKeys) * hd, uint32_t(hd), 2.0f);
      const auto q = test::random_floats(size_t(kRows) * hd, uint32_t(hd + 1));
      std::vector<const float*> rows;
      for (int r = 0; r < kRows; ++r) rows.push_back(q.data() + size_t(r) * hd);
      std::vector<float> s_all(size_t(kRows) * kKeys);
      set.score(k.data(), kKeys, hd, rows.data(), kRows, s_all.data(), kKeys);
      for (int r = 0; r < kRows; ++r) {
        std::vector<float> s_one(kKeys), s_few(size_t(3) * kKeys);
        set.score(k.data(), kKeys, hd, &rows[size_t(r)], 1, s_one.data(), kKeys);
        const float* three[] = {rows[size_t((r + 5) % kRows)], rows[size_t(r)], rows[0]};  // r in the middle
        set.score(k.data(), 7, hd, three, 3, s_few.data(), kKeys);                      // 7 keys only
        ASSERT_EQ(0, std::memcmp(s_one.data(), s_all.data() + size_t(r) * kKeys, kKeys * sizeof(float)))
            << set.name << " hd " << hd << " row " << r;
        ASSERT_EQ(0, std::memcmp(s_few.data() + kKeys, s_all.data() + size_t(r) * kKeys, 7 * sizeof(float)))
            << set.name << " hd " << hd << " row " << r;
      }
      // Softmax and values: all rows at once against each row alone (visible ranges vary per row,
      // one row sees nothing; the state starts empty for some rows, set for others).
      const int hdv = hd;
      const auto v = test::random_floats(size_t(kKeys) * hdv, uint32_t(hd + 2));
      std::vector<int> a(kRows), e(kRows);
      std::vector<float> m0(kRows), l0(kRows);
      for (int r = 0; r < kRows; ++r) {
        a[size_t(r)] = (r * 7) % kKeys;
        e[size_t(r)] = r == 4 ? a[size_t(r)] - 1 : std::min(kKeys - 1, a[size_t(r)] + 3 * r);
        m0[size_t(r)] = r % 3 == 0 ? -INFINITY : 0.5f * float(r % 5);
        l0[size_t(r)] = r % 3 == 0 ? 0.0f : 1.0f + float(r);
      }
      const auto acc0 = test::random_floats(size_t(kRows) * hdv, uint32_t(hd + 3));
      std::vector<float> S = s_all, m = m0, l = l0, acc = acc0;
      set.softmax(S.data(), kRows, a.data(), e.data(), 0.125f, 0.0f, m.data(), l.data(), acc.data(), hdv);
      set.acc(v.data(), kKeys, hdv, S.data(), kKeys, kRows, acc.data(), size_t(hdv));
      for (int r = 0; r < kRows; ++r) {
        std::vector<float> S1(s_all.begin() + r * kKeys, s_all.begin() + (r + 1) * kKeys);
        float m1 = m0[size_t(r)], l1 = l0[size_t(r)];
        std::vector<float> acc1(acc0.begin() + r * hdv, acc0.begin() + (r + 1) * hdv);
        set.softmax(S1.data(), 1, &a[size_t(r)], &e[size_t(r)], 0.125f, 0.0f, &m1, &l1, acc1.data(), hdv);
        set.acc(v.data(), kKeys, hdv, S1.data(), kKeys, 1, acc1.data(), size_t(hdv));
        const std::string what = std::string(set.name) + " hd " + std::to_string(hd) + " row " + std::to_string(r);
        ASSERT_EQ(0, std::memcmp(S1.data(), S.data() + size_t(r) * kKeys, kKeys * sizeof(float))) << what;
        ASSERT_EQ(0, std::memcmp(&m1, &m[size_t(r)], sizeof(float))) << what;
        ASSERT_EQ(0, std::memcmp(&l1, &l[size_t(r)], sizeof(float))) << what;
        ASSERT_EQ(0, std::memcmp(acc1.data(), acc.data() + size_t(r) * hdv, size_t(hdv) * sizeof(float))) << what;
      }
    }
}

// The fast softmax against the scalar one: masked keys get weight exactly 0, a row that sees no key
// keeps its state, and the rest agree to float rounding (softcap too).
TEST(AttentionTile, SoftmaxMatchesScalar) {
  const SoftmaxTileFn fast = softmax_tile_kernel();
  constexpr int kRows = 6, kKeys = kSoftmaxKeys, hdv = 48;
  for (float softcap : {0.0f, 20.0f}) {
    const auto s0 = test::random_floats(size_t(kRows) * kKeys, 51, 8.0f);
    const auto acc0 = test::random_floats(size_t(kRows) * hdv, 52);
    const int a[kRows] = {0, 5, 31, 10, 0, 3}, e[kRows] = {31, 20, 31, 9, 0, 30};  // row 3 sees none
    const float m0[kRows] = {-INFINITY, 0.0f, 2.0f, 1.0f, 5.0f, -1.0f}, l0[kRows] = {0, 2, 3, 4, 1, 7};
    std::vector<float> sf = s0, sr = s0, af = acc0, ar = acc0;
    float mf[kRows], mr[kRows], lf[kRows], lr[kRows];
    std::copy(m0, m0 + kRows, mf), std::copy(m0, m0 + kRows, mr), std::copy(l0, l0 + kRows, lf),
        std::copy(l0, l0 + kRows, lr);
    fast(sf.data(), kRows, a, e, 0.3f, softcap, mf, lf, af.data(), hdv);
    softmax_tile_scalar(sr.data(), kRows, a, e, 0.3f, softcap, mr, lr, ar.data(), hdv);
    for (int r = 0; r < kRows; ++r) {
      EXPECT_EQ(mf[r], mr[r]) << r;
      EXPECT_NEAR(lf[r], lr[r], 1e-5 * lr[r]) << r;
      for (int j = 0; j < kKeys; ++j) {
        const float wf = sf[size_t(r) * kKeys + j], wr = sr[size_t(r) * kKeys + j];
        if (j < a[r] || j > e[r]) {
          EXPECT_EQ(wf, 0.0f) << r << " " << j;
        } else {
          EXPECT_NEAR(wf, wr, 1e-6 + 1e-6 * wr) << r << " " << j;
        }
      }
      for (int i = 0; i < hdv; ++i) EXPECT_NEAR(af[size_t(r) * hdv + i], ar[size_t(r) * hdv + i], 1e-6) << r;
    }
    EXPECT_EQ(mf[3], m0[3]);
    EXPECT_EQ(lf[3], l0[3]);
    EXPECT_EQ(0, std::memcmp(af.data() + 3 * hdv, acc0.data() + 3 * hdv, hdv * sizeof(float)));
  }
}

}  // namespace
}  // namespace polykv
