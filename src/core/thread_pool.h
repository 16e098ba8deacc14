// A fixed pool of worker threads for data-parallel kernels. The caller participates as thread 0.
// Rules: run() is not reentrant (a job must not call run() on the same pool), and only one thread
// at a time may call run().
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace polykv {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);  // n_threads <= 0: hardware concurrency
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Runs job(thread_index, n_threads) on every thread and returns when all have finished.
  void run(const std::function<void(int, int)>& job);

  // Splits [0, n) into n_threads contiguous ranges and runs fn(begin, end) on each (empty ones skipped).
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker_loop(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  const std::function<void(int, int)>* job_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace polykv
