// One-off micro benchmark of decode attention alone (one query token) over a filled KV cache of
// llama-3.2-1b's attention shape (32 query heads, 8 KV heads, head_dim 64), per K/V type pair:
// best-of-N milliseconds for the 16 layers of one token (each layer its own cache), and the KV bytes
// read per second. It fills the cache with random K/V directly (no model), so depth 16384 takes seconds.
// Not part of the CMake build; after building polykv_lib:
//   g++ -std=c++20 -O2 -Isrc bench/attention_bench.cpp build/libpolykv_lib.a \
//       $(pkg-config --libs libpcre2-8 icu-uc) -lpthread -o build/attention_bench
//   build/attention_bench [depth=16384] [threads=2] [repetitions=10]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "backend/cpu/attention.h"

using namespace polykv;

int main(int argc, char** argv) {
  const int depth = argc > 1 ? std::atoi(argv[1]) : 16384;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  const int reps = argc > 3 ? std::atoi(argv[3]) : 10;
  constexpr int kHeadKv = 8, kHeadDim = 64, kHead = 32, kLayers = 16, kChunk = 512;
  ThreadPool pool(threads);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  std::vector<float> kv_rows(size_t(kChunk) * kHeadKv * kHeadDim);  // [kChunk][n_head_kv][head_dim]
  std::vector<float> q(size_t(kHead) * kHeadDim), out(q.size());    // [n_head][head_dim]
  for (float& x : kv_rows) x = normal(rng);
  for (float& x : q) x = normal(rng);
  const std::pair<KvType, KvType> pairs[] = {
      {KvType::F16, KvType::F16}, {KvType::Q8_0, KvType::Q8_0}, {KvType::Q8_0, KvType::Turbo3},
      {KvType::Q8_0, KvType::Turbo3T}, {KvType::Turbo3, KvType::Turbo3}, {KvType::Q4_0, KvType::Q4_0},
      {KvType::Turbo4, KvType::Turbo4}};
  for (auto [kt, vt] : pairs) {
    // All 16 layers hold their own cache, as in the model: the KV a decode step reads does not fit
    // in any CPU cache, so the step streams it from memory as a real one does.
    KvCache kv(KvShape{kLayers, kHeadKv, kHeadDim, kHeadDim, {}}, kt, vt, depth + 1);
    for (int layer = 0; layer < kLayers; ++layer)
      for (int p = 0; p < depth + 1; p += kChunk)
        kv.store(layer, p, std::min(kChunk, depth + 1 - p), kv_rows.data(), kv_rows.data(), &pool);
    kv.commit(depth + 1);
    AttentionParams ap;
    ap.n_head = kHead;
    ap.scale = 0.125f;
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int layer = 0; layer < kLayers; ++layer) attention(ap, kv.view(layer), depth, 1, q.data(), out.data(), pool);
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    const double kv_bytes = double(kv.bytes_per_token()) * (depth + 1);  // all layers
    std::printf("%-7s/%-7s depth %6d threads %d: %7.1f ms/token (%d layers), %5.2f GB/s of KV\n", kv_type_name(kt),
                kv_type_name(vt), depth, threads, best * 1e3, kLayers, kv_bytes / best / 1e9);
  }
  return 0;
}
