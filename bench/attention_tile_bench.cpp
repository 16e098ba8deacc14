// One-off micro benchmark of attention's tile kernels on L1-resident data (AVX-512): the value tile
// (accumulate_tile, hdv 128), the integer q8_0 score tile (score_tile_q8, with its repack) and the f32
// score tile (score_tile, K already decoded to f32) and that decode of 32 q8_0 rows, 32 keys, head size 128, 2 and 16 rows, best of 7
// passes of 20000 calls, one thread. Not part of the CMake build; after building polykv_lib:
//   g++ -std=c++20 -O2 -Isrc bench/attention_tile_bench.cpp build/libpolykv_lib.a \
//       $(pkg-config --libs libpcre2-8 icu-uc) -lpthread -o build/attention_tile_bench
//   build/attention_tile_bench
#include <chrono>
#include <cstdio>
#include <vector>
#include <random>
#include <algorithm>
#include "backend/cpu/attention_tile.h"
#include "backend/cpu/attention_q8.h"
#include "backend/cpu/kv_row_ops.h"
using namespace polykv;
int main() {
  auto acc_fn = accumulate_tile_avx512();
  auto q8 = score_tile_q8_avx512();
  const int hdv = 128, rows = 16, keys = 32;
  std::vector<float> v(keys * hdv), w(rows * 32), acc(rows * hdv);
  std::mt19937 rng(1); std::uniform_real_distribution<float> u(0, 1);
  for (auto& x : v) x = u(rng); for (auto& x : w) x = u(rng) * 1e-3f;
  for (int nr : {2, 16}) {
    double best = 1e9;
    for (int pass = 0; pass < 7; ++pass) {
      auto t0 = std::chrono::steady_clock::now();
      for (int it = 0; it < 20000; ++it) acc_fn(v.data(), keys, hdv, w.data(), 32, nr, acc.data(), hdv);
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 20000);
    }
    std::printf("accumulate rows %d: %.1f ns per tile (%.2f ns per row), FMA count %d -> %.2f FMA/ns\n", nr, best * 1e9, best * 1e9 / nr, nr * keys * hdv / 16, nr * keys * hdv / 16 / (best * 1e9));
  }
  // q8 scores
  std::vector<std::vector<uint8_t>> krows(32, std::vector<uint8_t>(4 * 34));
  for (auto& r : krows) for (auto& b : r) b = uint8_t(rng() & 0x3F);
  std::vector<const uint8_t*> kp; for (auto& r : krows) kp.push_back(r.data());
  std::vector<uint8_t> qbuf(16 * q8_prepared_bytes(128)); std::vector<const uint8_t*> qp;
  std::vector<float> qx(128); for (int r = 0; r < 16; ++r) { for (auto& x : qx) x = u(rng) - 0.5f; q8_prepare_query(qx.data(), qbuf.data() + r * q8_prepared_bytes(128), 128); qp.push_back(qbuf.data() + r * q8_prepared_bytes(128)); }
  std::vector<float> S(16 * 32);
  for (int nr : {2, 16}) {
    double best = 1e9;
    for (int pass = 0; pass < 7; ++pass) {
      auto t0 = std::chrono::steady_clock::now();
      for (int it = 0; it < 20000; ++it) q8(kp.data(), 128, qp.data(), nr, S.data(), 32);
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 20000);
    }
    std::printf("q8 scores rows %d: %.1f ns per tile\n", nr, best * 1e9);
  }
  {  // what the f32 path adds per tile for q8_0 K: its 32 rows decoded to f32
    const KvRowKernels* rk = kv_row_kernels_avx512(KvType::Q8_0);
    std::vector<float> kd(32 * 128);
    double best = 1e9;
    for (int pass = 0; pass < 7; ++pass) {
      auto t0 = std::chrono::steady_clock::now();
      for (int it = 0; it < 20000; ++it)
        for (int j = 0; j < 32; ++j) rk->decode(kp[j], kd.data() + j * 128, 128);
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 20000);
    }
    std::printf("q8_0 decode of the tile's 32 K rows (f32 path): %.1f ns per tile\n", best * 1e9);
  }
  auto sc = score_tile_avx512();
  std::vector<float> kf(32 * 128); for (auto& x : kf) x = u(rng);
  std::vector<const float*> qf; std::vector<float> qfb(16 * 128); for (int r = 0; r < 16; ++r) { for (int i = 0; i < 128; ++i) qfb[r*128+i] = u(rng); qf.push_back(qfb.data() + r * 128); }
  for (int nr : {2, 16}) {
    double best = 1e9;
    for (int pass = 0; pass < 7; ++pass) {
      auto t0 = std::chrono::steady_clock::now();
      for (int it = 0; it < 20000; ++it) sc(kf.data(), 32, 128, qf.data(), nr, S.data(), 32);
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 20000);
    }
    std::printf("f32 scores rows %d: %.1f ns per tile\n", nr, best * 1e9);
  }
}
