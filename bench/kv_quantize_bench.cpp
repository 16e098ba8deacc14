// One-off micro benchmark of writing KV rows: quantize_head per KV type (the reference encoder that
// KvCache::store runs), one thread, head_dim 128, best of 5 passes over 4096 random Gaussian rows.
// Not part of the CMake build; after building polykv_lib:
//   g++ -std=c++20 -O2 -Isrc bench/kv_quantize_bench.cpp build/libpolykv_lib.a \
//       $(pkg-config --libs libpcre2-8 icu-uc) -lpthread -o build/kv_quantize_bench
//   build/kv_quantize_bench
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "kv/kv_type.h"

using namespace polykv;

int main() {
  constexpr int kHeadDim = 128, kRows = 4096, kPasses = 5;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  std::vector<float> x(size_t(kRows) * kHeadDim);  // [kRows][kHeadDim]
  for (float& v : x) v = normal(rng);
  for (KvType t : kAllKvTypes) {
    const size_t row_bytes = kv_head_bytes(t, kHeadDim);
    std::vector<uint8_t> out(row_bytes * kRows);
    double best = 1e30;
    for (int pass = 0; pass < kPasses; ++pass) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int r = 0; r < kRows; ++r)
        kv_type_ops(t).quantize_head(x.data() + size_t(r) * kHeadDim, out.data() + size_t(r) * row_bytes, kHeadDim);
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::printf("%-8s %7.3f us per row of %d values\n", kv_type_name(t), best * 1e6 / kRows, kHeadDim);
  }
  return 0;
}
