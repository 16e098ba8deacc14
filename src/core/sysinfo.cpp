#include "core/sysinfo.h"

#include <sys/mman.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

namespace polykv {

double read_pass_bandwidth(ThreadPool& pool, const uint64_t* buf, size_t n) {
  volatile uint64_t sink = 0;
  const auto t0 = std::chrono::steady_clock::now();
  pool.parallel_for(int64_t(n), [&](int64_t b, int64_t e) {
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    int64_t i = b;
    for (; i + 4 <= e; i += 4) {
      a0 += buf[size_t(i)];
      a1 += buf[size_t(i + 1)];
      a2 += buf[size_t(i + 2)];
      a3 += buf[size_t(i + 3)];
    }
    for (; i < e; ++i) a0 += buf[size_t(i)];
    sink = sink + (a0 ^ a1 ^ a2 ^ a3);
  });
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return double(n * sizeof(uint64_t)) / s;
}

double measure_read_bandwidth(ThreadPool& pool, size_t bytes) {
  const size_t n = bytes / sizeof(uint64_t);
  // In transparent huge pages where the OS allows, as the CPU backend's packed weights
  // (backend/cpu/packed_weights.h): the floor reads memory the way decode does.
  constexpr size_t kHuge = size_t(2) << 20;
  const size_t size = (n * sizeof(uint64_t) + kHuge - 1) / kHuge * kHuge;
  std::unique_ptr<uint64_t, void (*)(void*)> buf(static_cast<uint64_t*>(std::aligned_alloc(kHuge, size)), std::free);
  if (!buf) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  madvise(buf.get(), size, MADV_HUGEPAGE);
#endif
  pool.parallel_for(int64_t(n), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) buf.get()[size_t(i)] = uint64_t(i);
  });
  double best = 0;
  for (int pass = 0; pass < 5; ++pass) best = std::max(best, read_pass_bandwidth(pool, buf.get(), n));
  return best;
}

size_t peak_rss_bytes() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return size_t(ru.ru_maxrss) * 1024;
}

}  // namespace polykv
