// One-off micro benchmarks of attention alone over llama-3.2-1b's attention shape (32 query heads,
// 8 KV heads, head_dim 64, 16 layers, each layer its own KV, so a step streams it from memory as a
// real one does). K/V are random rows quantized directly (no model).
//
//   decode:  one query token over a filled KV cache, per K/V type pair: best-of-N milliseconds for
//            the 16 layers of one token, and the KV bytes read per second.
//   cascade: N sequences sharing one prefix of P tokens (the same blocks) plus private suffixes of
//            24..39 tokens, one decode token each: a step as N separate attention() calls against
//            one attention_batch() (shared tiles decoded once for all N), best-of-N milliseconds for
//            the 16 layers, interleaved; outputs checked bit-identical.
//
// Not part of the CMake build; after building polykv_lib:
//   g++ -std=c++20 -O2 -Isrc bench/attention_bench.cpp build/libpolykv_lib.a
//       $(pkg-config --libs libpcre2-8 icu-uc) -lpthread -o build/attention_bench   (one line)
//   build/attention_bench [depth=16384] [threads=2] [repetitions=10]
//   build/attention_bench cascade [n_seqs=16] [prefix=4096] [threads=2] [repetitions=5] [block_tokens=64]
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/attention.h"

using namespace polykv;

namespace {

constexpr int kHeadKv = 8, kHeadDim = 64, kHead = 32, kLayers = 16;

// Wall-clock and process CPU seconds of one run of fn; best keeps the minimum of each. On a loaded
// machine CPU time (1 thread: no spinning workers) is the steadier figure.
struct Best {
  double wall = 1e30, cpu = 1e30;
};
template <class F>
void time_into(Best& best, F&& fn) {
  timespec c0, c1;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
  best.wall = std::min(best.wall, wall);
  best.cpu = std::min(best.cpu, double(c1.tv_sec - c0.tv_sec) + 1e-9 * double(c1.tv_nsec - c0.tv_nsec));
}

int decode_bench(int depth, int threads, int reps) {
  constexpr int kChunk = 512;
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
    KvCache kv(KvShape{kLayers, kHeadKv, kHeadDim, kHeadDim, {}}, kt, vt, depth + 1);
    for (int layer = 0; layer < kLayers; ++layer)
      for (int p = 0; p < depth + 1; p += kChunk)
        kv.store(layer, p, std::min(kChunk, depth + 1 - p), kv_rows.data(), kv_rows.data(), &pool);
    kv.commit(depth + 1);
    AttentionParams ap;
    ap.n_head = kHead;
    ap.scale = 0.125f;
    Best best;
    for (int r = 0; r < reps; ++r)
      time_into(best, [&] {
        for (int layer = 0; layer < kLayers; ++layer)
          attention(ap, kv.view(layer), depth, 1, q.data(), out.data(), pool);
      });
    const double kv_bytes = double(kv.bytes_per_token()) * (depth + 1);  // all layers
    std::printf("%-7s/%-7s depth %6d threads %d: %7.1f ms/token (%d layers; CPU %7.1f ms), %5.2f GB/s of KV\n",
                kv_type_name(kt), kv_type_name(vt), depth, threads, best.wall * 1e3, kLayers, best.cpu * 1e3,
                kv_bytes / best.wall / 1e9);
  }
  return 0;
}

#ifndef ATTENTION_BENCH_DECODE_ONLY  // (defined to build the decode bench against an older library)
// Blocks of one layer's K or V rows ([n_head_kv][block_tokens], kv_cache.h's layout), random rows
// quantized on the pool.
struct Blocks {
  std::vector<std::unique_ptr<uint8_t[]>> storage;
  const uint8_t* add(KvType t, int bt, uint32_t seed, ThreadPool& pool) {
    const size_t row_bytes = kv_head_bytes(t, kHeadDim), rows = size_t(kHeadKv) * size_t(bt);
    auto buf = std::make_unique<uint8_t[]>(rows * row_bytes);
    uint8_t* dst = buf.get();
    pool.parallel_for(int64_t(rows), [&](int64_t b, int64_t e) {
      std::mt19937 rng(seed * 1000003u + uint32_t(b));
      std::normal_distribution<float> normal;
      float x[kHeadDim];
      for (int64_t r = b; r < e; ++r) {
        for (float& v : x) v = normal(rng);
        kv_type_ops(t).quantize_head(x, dst + size_t(r) * row_bytes, kHeadDim);
      }
    });
    storage.push_back(std::move(buf));
    return storage.back().get();
  }
};

int cascade_bench(int n_seqs, int prefix, int threads, int reps, int bt) {
  ThreadPool pool(threads);
  const std::pair<KvType, KvType> pairs[] = {
      {KvType::Q8_0, KvType::Turbo3T}, {KvType::F16, KvType::F16}, {KvType::Q8_0, KvType::Q8_0}};
  std::mt19937 rng(2);
  std::normal_distribution<float> normal;
  for (auto [kt, vt] : pairs) {
    Blocks store;
    // Per layer and sequence: block tables [n_blocks], the shared prefix blocks first.
    std::vector<std::vector<std::vector<const uint8_t*>>> kb(kLayers), vb(kLayers);
    std::vector<int> len(static_cast<size_t>(n_seqs));
    for (int s = 0; s < n_seqs; ++s) len[size_t(s)] = prefix + 24 + s % 16;  // private suffixes of 24..39 tokens
    uint32_t seed = 1;
    for (int layer = 0; layer < kLayers; ++layer) {
      const int shared_blocks = prefix / bt;  // full blocks of the prefix; the rest is private
      std::vector<const uint8_t*> sk, sv;
      for (int b = 0; b < shared_blocks; ++b) {
        sk.push_back(store.add(kt, bt, seed++, pool));
        sv.push_back(store.add(vt, bt, seed++, pool));
      }
      kb[size_t(layer)].resize(size_t(n_seqs));
      vb[size_t(layer)].resize(size_t(n_seqs));
      for (int s = 0; s < n_seqs; ++s) {
        auto& k = kb[size_t(layer)][size_t(s)];
        auto& v = vb[size_t(layer)][size_t(s)];
        k = sk;
        v = sv;
        for (int b = shared_blocks; b < (len[size_t(s)] + bt - 1) / bt; ++b) {
          k.push_back(store.add(kt, bt, seed++, pool));
          v.push_back(store.add(vt, bt, seed++, pool));
        }
      }
    }
    const size_t n = static_cast<size_t>(n_seqs);
    std::vector<std::vector<float>> q(n), out_sep(n), out_batch(n);
    for (int s = 0; s < n_seqs; ++s) {
      q[size_t(s)].resize(size_t(kHead) * kHeadDim);
      for (float& x : q[size_t(s)]) x = normal(rng);
      out_sep[size_t(s)].resize(q[size_t(s)].size());
      out_batch[size_t(s)].resize(q[size_t(s)].size());
    }
    // seqs[layer][s]
    std::vector<std::vector<AttentionSeq>> seqs(kLayers);
    for (int layer = 0; layer < kLayers; ++layer)
      for (int s = 0; s < n_seqs; ++s) {
        KvLayerView v;
        v.k_type = kt;
        v.v_type = vt;
        v.block_tokens = bt;
        v.n_head_kv = kHeadKv;
        v.head_dim = v.head_dim_v = kHeadDim;
        v.k_blocks = kb[size_t(layer)][size_t(s)].data();
        v.v_blocks = vb[size_t(layer)][size_t(s)].data();
        v.k_head_bytes = kv_head_bytes(kt, kHeadDim);
        v.v_head_bytes = kv_head_bytes(vt, kHeadDim);
        seqs[size_t(layer)].push_back({v, len[size_t(s)] - 1, 1, q[size_t(s)].data(), out_batch[size_t(s)].data()});
      }
    AttentionParams ap;
    ap.n_head = kHead;
    ap.scale = 0.125f;
    Best sep, batch;
    for (int r = 0; r < reps; ++r) {  // interleaved
      time_into(sep, [&] {
        for (int layer = 0; layer < kLayers; ++layer)
          for (int s = 0; s < n_seqs; ++s) {
            const AttentionSeq& a = seqs[size_t(layer)][size_t(s)];
            attention(ap, a.kv, a.pos0, 1, a.q, out_sep[size_t(s)].data(), pool);
          }
      });
      time_into(batch, [&] {
        for (int layer = 0; layer < kLayers; ++layer) attention_batch(ap, seqs[size_t(layer)], pool);
      });
    }
    bool same = true;
    for (int s = 0; s < n_seqs; ++s)
      same = same && std::memcmp(out_sep[size_t(s)].data(), out_batch[size_t(s)].data(),
                                 out_sep[size_t(s)].size() * sizeof(float)) == 0;
    std::printf("%-5s/%-7s %2d seqs x (%d shared + 24..39 own) block %d threads %d, ms/step (%d layers): separate "
                "%7.1f (CPU %7.1f), batch %7.1f (CPU %7.1f): %.2fx (CPU %.2fx), outputs %s\n",
                kv_type_name(kt), kv_type_name(vt), n_seqs, prefix, bt, threads, kLayers, sep.wall * 1e3,
                sep.cpu * 1e3, batch.wall * 1e3, batch.cpu * 1e3, sep.wall / batch.wall, sep.cpu / batch.cpu,
                same ? "bit-identical" : "DIFFERENT");
    if (!same) return 1;
  }
  return 0;
}
#endif

}  // namespace

int main(int argc, char** argv) {
#ifndef ATTENTION_BENCH_DECODE_ONLY
  if (argc > 1 && std::string(argv[1]) == "cascade") {
    return cascade_bench(argc > 2 ? std::atoi(argv[2]) : 16, argc > 3 ? std::atoi(argv[3]) : 4096,
                         argc > 4 ? std::atoi(argv[4]) : 2, argc > 5 ? std::atoi(argv[5]) : 5,
                         argc > 6 ? std::atoi(argv[6]) : 64);
  }
#endif
  return decode_bench(argc > 1 ? std::atoi(argv[1]) : 16384, argc > 2 ? std::atoi(argv[2]) : 2,
                      argc > 3 ? std::atoi(argv[3]) : 10);
}
