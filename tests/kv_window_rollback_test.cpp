// KvCache::truncate on a model with sliding-window layers: rolling back to fewer tokens than the
// window is fine while no block was released (bench rolls back to depth 0 between repetitions on
// gpt-oss, window 128), and still refused once the positions it needs are gone.
#include <gtest/gtest.h>

#include "core/error.h"
#include "kv/kv_cache.h"
#include "test_util.h"

namespace polykv {
namespace {

TEST(KvWindowRollback, BackToZeroBeforeAnyRelease) {
  KvShape shape{2, 1, 32, 32, {16, 0}};  // layer 0: window 16
  KvCache kv(shape, KvType::F32, KvType::F32, 256, 16, /*rollback_tokens=*/8);
  const auto k = test::random_floats(size_t(8) * 32, 1), v = test::random_floats(size_t(8) * 32, 2);
  for (int l = 0; l < 2; ++l) kv.store(l, 0, 8, k.data(), v.data());
  kv.commit(8);
  EXPECT_NO_THROW(kv.truncate(0));
  EXPECT_EQ(kv.n_tokens(), 0);
}

TEST(KvWindowRollback, RefusedOncePositionsAreReleased) {
  KvShape shape{1, 1, 32, 32, {16}};
  KvCache kv(shape, KvType::F32, KvType::F32, 256, 16, /*rollback_tokens=*/0);
  const auto k = test::random_floats(size_t(80) * 32, 1), v = test::random_floats(size_t(80) * 32, 2);
  kv.store(0, 0, 80, k.data(), v.data());
  kv.commit(80);  // keeps from 80 - 16 + 1 = 65: blocks 0..3 (positions < 64) released
  EXPECT_THROW(kv.truncate(10), Error);
  EXPECT_NO_THROW(kv.truncate(79));
}

}  // namespace
}  // namespace polykv
