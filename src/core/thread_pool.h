// A fixed pool of worker threads for data-parallel kernels. The caller participates.
//
// Work is split into chunks that threads claim dynamically, so a worker the OS has not scheduled
// (a loaded machine) delays nothing: the caller and the running workers take its share.
// Rules: calls are not reentrant (a job must not call into the same pool), and only one thread at a
// time may call run() / parallel_for().
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace polykv {

class ThreadPool {
 public:
  // n_threads <= 0: hardware concurrency. Throws Error if a thread cannot be started (the threads
  // already started are stopped and joined first).
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(begin, end) over disjoint ranges covering [0, n), in chunks of about n / (8 * size())
  // (at least min_chunk), and returns when all are done. Ranges may run on any thread, in any order.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t min_chunk = 1);

  // Calls job(i, size()) once for every i in [0, size()), possibly several on one thread; a job
  // must not wait for another to run concurrently.
  void run(const std::function<void(int, int)>& job);

 private:
  void worker_loop();
  void stop_workers();  // wakes every worker with stop_ set and joins it
  void work_on_current_job();

  int n_threads_;
  std::vector<std::thread> workers_;
  // The current job, published by bumping generation_ and read by workers that registered in active_.
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t chunk_ = 1;
  std::atomic<int64_t> next_{0};  // first unclaimed index
  std::atomic<int64_t> done_{0};  // indices finished
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> active_{0};  // workers between registering for a generation and leaving it
  std::atomic<bool> stop_{false};
};

}  // namespace polykv
