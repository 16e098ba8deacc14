// The tile kernels of attention (backend/cpu/attention_tile.h): the best kernel for this CPU
// against the scalar reference, on awkward row, key and head sizes.
#include <gtest/gtest.h>

#include <cmath>
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
