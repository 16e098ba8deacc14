// Machine measurements for benchmarks: memory read bandwidth, peak resident memory.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/thread_pool.h"

namespace polykv {

// Measured read bandwidth in bytes/s: the best of several passes of `pool` threads summing a buffer
// of `bytes` (much larger than the caches).
double measure_read_bandwidth(ThreadPool& pool, size_t bytes = size_t(1) << 30);

// One such pass over buf[0, n) (filled by the caller), in bytes/s: for benchmarks that pair each pass
// with a pass of their own kernel on a host whose bandwidth drifts (bench/ternary_bench.cpp --paired).
double read_pass_bandwidth(ThreadPool& pool, const uint64_t* buf, size_t n);

size_t peak_rss_bytes();

}  // namespace polykv
