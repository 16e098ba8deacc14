// alloc_packed_bytes (backend/cpu/packed_weights.h): the packed weights' buffers, in huge-page memory. Small
// buffers are carved from shared chunks: they must never overlap, must stay 64-byte aligned, must survive the
// release of their neighbours (a chunk lives until its last buffer goes) and must be safe to take from
// several threads at once.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "backend/cpu/packed_weights.h"

namespace polykv {
namespace {

using Buffer = std::unique_ptr<uint8_t, void (*)(void*)>;

TEST(PackedAlloc, AlignedAndDisjointAcrossChunks) {
  std::mt19937 rng(7);
  std::vector<Buffer> bufs;
  std::vector<size_t> sizes;
  size_t total = 0;
  while (total < (size_t(200) << 20)) {  // past three 64 MiB chunks
    const size_t n = rng() % 3 == 0 ? size_t(1) + rng() % 64 : size_t(1) + rng() % (3 << 20);  // tiny, or up to 3 MiB
    bufs.push_back(cpu::alloc_packed_bytes(n));
    sizes.push_back(n);
    total += n;
  }
  for (size_t i = 0; i < bufs.size(); ++i) {
    const uintptr_t p = reinterpret_cast<uintptr_t>(bufs[i].get());
    ASSERT_EQ(p % 64, 0u) << "buffer " << i;
    if (sizes[i] >= (size_t(2) << 20)) ASSERT_EQ(p % (size_t(2) << 20), 0u) << "buffer " << i << " of " << sizes[i];
    std::memset(bufs[i].get(), int(i % 251), sizes[i]);
  }
  // Release every other buffer (chunks stay alive for the rest), then check the rest kept their bytes.
  for (size_t i = 0; i < bufs.size(); i += 2) bufs[i].reset();
  for (size_t i = 1; i < bufs.size(); i += 2) {
    const uint8_t want = uint8_t(i % 251);
    const uint8_t* p = bufs[i].get();
    ASSERT_TRUE(std::all_of(p, p + sizes[i], [&](uint8_t b) { return b == want; })) << "buffer " << i;
  }
  // Intervals never overlap.
  std::vector<std::pair<uintptr_t, uintptr_t>> iv;
  for (size_t i = 1; i < bufs.size(); i += 2)
    iv.push_back({reinterpret_cast<uintptr_t>(bufs[i].get()), reinterpret_cast<uintptr_t>(bufs[i].get()) + sizes[i]});
  std::sort(iv.begin(), iv.end());
  for (size_t i = 1; i < iv.size(); ++i) ASSERT_LE(iv[i - 1].second, iv[i].first);
}

TEST(PackedAlloc, ConcurrentCarving) {
  constexpr int kThreads = 4, kPer = 2000;
  std::vector<std::vector<Buffer>> got(kThreads);
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < kPer; ++i) {
        got[size_t(t)].push_back(cpu::alloc_packed_bytes(size_t(4096 + 64 * (i % 37))));
        std::memset(got[size_t(t)].back().get(), t + 1, 4096);
      }
    });
  for (auto& th : ts) th.join();
  for (int t = 0; t < kThreads; ++t)
    for (const Buffer& b : got[size_t(t)])
      ASSERT_TRUE(std::all_of(b.get(), b.get() + 4096, [&](uint8_t x) { return x == t + 1; })) << "thread " << t;
}

}  // namespace
}  // namespace polykv
