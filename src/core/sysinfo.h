// Machine measurements for benchmarks: memory read bandwidth, peak resident memory.
#pragma once
#include <cstddef>

#include "core/thread_pool.h"

namespace polykv {

// Measured read bandwidth in bytes/s: the best of several passes of `pool` threads summing a buffer
// of `bytes` (much larger than the caches).
double measure_read_bandwidth(ThreadPool& pool, size_t bytes = size_t(1) << 30);

size_t peak_rss_bytes();

}  // namespace polykv
