#include "core/thread_pool.h"

#include <algorithm>
#include <exception>

#include "core/error.h"

#if defined(__x86_64__)
#include <immintrin.h>
static inline void cpu_relax() { _mm_pause(); }
#else
static inline void cpu_relax() {}
#endif

namespace polykv {

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = int(std::max(1u, std::thread::hardware_concurrency()));
  n_threads_ = n_threads;
  workers_.reserve(size_t(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) {
    try {
      workers_.emplace_back([this] { worker_loop(); });
    } catch (const std::exception& e) {  // system_error (no thread, no stack) or bad_alloc
      stop_workers();  // a joinable std::thread destroyed unjoined would terminate the process
      fail("cannot start thread ", i + 1, " of ", n_threads_, ": ", e.what(), "; use fewer threads (-t)");
    }
  }
}

ThreadPool::~ThreadPool() { stop_workers(); }

void ThreadPool::stop_workers() {
  stop_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
}

void ThreadPool::work_on_current_job() {
  for (;;) {
    const int64_t begin = next_.fetch_add(chunk_, std::memory_order_acq_rel);
    if (begin >= n_) return;
    const int64_t end = std::min(n_, begin + chunk_);
    (*fn_)(begin, end);
    done_.fetch_add(end - begin, std::memory_order_acq_rel);
  }
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    // Spin briefly (jobs come in rapid succession during a forward pass), then sleep on the counter.
    uint64_t g = generation_.load(std::memory_order_acquire);
    for (int spin = 0; g == seen && spin < 20000; ++spin) {
      cpu_relax();
      g = generation_.load(std::memory_order_acquire);
    }
    while (g == seen) {
      generation_.wait(seen, std::memory_order_acquire);
      g = generation_.load(std::memory_order_acquire);
    }
    seen = g;
    if (stop_.load()) return;
    if (g & 1) continue;  // odd: the caller is writing the next job (parallel_for); wait for its even generation
    // Register, then confirm the job is still generation g. The caller makes the generation odd,
    // waits until no worker is registered and only then writes the next job, so a worker that woke
    // late for an older job either left before the write or sees the generation moved and leaves.
    active_.fetch_add(1, std::memory_order_acq_rel);
    if (generation_.load(std::memory_order_acquire) == g) work_on_current_job();
    active_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t min_chunk) {
  if (n <= 0) return;
  if (n_threads_ == 1) {
    fn(0, n);
    return;
  }
  // Generations: even = a job is published, odd = the caller is writing one. A worker that woke late
  // for the previous job may register at any time; making the generation odd first turns it away
  // (it re-checks the generation after registering), and waiting for active_ == 0 lets one that was
  // already inside the previous job (claiming past its end) leave. Only then is the job written:
  // without this, a late worker could claim ranges of the half-written job and add them to done_
  // before the reset below, and the caller would wait forever (a hang seen on a 16-core machine).
  generation_.fetch_add(1, std::memory_order_acq_rel);  // odd
  for (int spin = 0; active_.load(std::memory_order_acquire) != 0; ++spin)
    if (spin > 1000) std::this_thread::yield(); else cpu_relax();
  fn_ = &fn;
  n_ = n;
  chunk_ = std::max<int64_t>(std::max<int64_t>(1, min_chunk), n / (8 * int64_t(n_threads_)));
  next_.store(0, std::memory_order_relaxed);
  done_.store(0, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_acq_rel);  // even: published
  generation_.notify_all();
  work_on_current_job();
  for (int spin = 0; done_.load(std::memory_order_acquire) < n; ++spin)
    if (spin > 1000) std::this_thread::yield(); else cpu_relax();
  // A worker may still be registered (claiming past the end); wait until it leaves.
  for (int spin = 0; active_.load(std::memory_order_acquire) != 0; ++spin)
    if (spin > 1000) std::this_thread::yield(); else cpu_relax();
}

void ThreadPool::run(const std::function<void(int, int)>& job) {
  const int nt = n_threads_;
  parallel_for(nt, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) job(int(i), nt);
  });
}

}  // namespace polykv
