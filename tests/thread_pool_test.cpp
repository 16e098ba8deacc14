// ThreadPool: every index covered exactly once, for any n and thread count, over many back-to-back
// jobs (the pattern of a forward pass), including while the machine is oversubscribed.
#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "core/thread_pool.h"

namespace polykv {
namespace {

TEST(ThreadPool, ParallelForCoversEachIndexOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 2, 7, 64, 1000, 4099}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.parallel_for(n, [&](int64_t b, int64_t e) {
        ASSERT_LE(0, b);
        ASSERT_LE(b, e);
        ASSERT_LE(e, n);
        for (int64_t i = b; i < e; ++i) hits[size_t(i)].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[size_t(i)].load(), 1) << "n=" << n << " i=" << i;
    }
  }
}

TEST(ThreadPool, ManyBackToBackJobs) {
  ThreadPool pool(4);  // more threads than this machine's cores: workers are often descheduled
  std::atomic<int64_t> total{0};
  for (int job = 0; job < 20000; ++job)
    pool.parallel_for(37, [&](int64_t b, int64_t e) { total.fetch_add(e - b); });
  EXPECT_EQ(total.load(), 20000 * 37);
}

TEST(ThreadPool, RunCallsEveryThreadIndexOnce) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> hits(3);
  for (int rep = 0; rep < 100; ++rep)
    pool.run([&](int i, int n) {
      ASSERT_EQ(n, 3);
      hits[size_t(i)].fetch_add(1);
    });
  for (auto& h : hits) EXPECT_EQ(h.load(), 100);
}

}  // namespace
}  // namespace polykv
