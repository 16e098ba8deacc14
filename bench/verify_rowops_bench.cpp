// Wall time (best of 300) of one llama-3.2-1b layer's per-row ops for k rows on a 2-thread CpuBackend
// (docs/VERIFY_KERNELS.md, 2026-12-01e): 2 x add_rmsnorm (2048), rope_qk (32 + 8 heads of 64), gated
// activation (k x 8192). POLYKV_ROWOPS=serial: the former one-thread ops. Not part of the CMake build:
//   g++ -std=c++20 -O2 -Isrc bench/verify_rowops_bench.cpp build/libpolykv_lib.a
//       $(pkg-config --libs libpcre2-8) -lpthread -o build/verify_rowops_bench
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>
#include "backend/cpu/cpu_backend.h"
using namespace polykv;
int main() {
  CpuBackend be(2);
  std::mt19937 r(1); std::normal_distribution<float> nd;
  auto rnd = [&](size_t n) { std::vector<float> v(n); for (auto& x : v) x = nd(r); return v; };
  auto w = rnd(2048); std::vector<float> inv(32); for (int i = 0; i < 32; ++i) inv[i] = 1.0f / std::pow(500000.0f, 2.0f * i / 64);
  for (int k : {1, 2, 4, 8}) {
    auto x = rnd(2048 * k), h = rnd(2048 * k), q = rnd(2048 * k), kk = rnd(512 * k), g = rnd(8192 * k), u = rnd(8192 * k);
    std::vector<int32_t> pos(k); for (int i = 0; i < k; ++i) pos[i] = 100 + i;
    double best = 1e9;
    for (int rep = 0; rep < 300; ++rep) {
      auto t0 = std::chrono::steady_clock::now();
      be.add_rmsnorm(x.data(), h.data(), w.data(), h.data(), k, 2048, 1e-5f);
      be.rope_qk(q.data(), 32, kk.data(), 8, k, 64, 64, pos.data(), inv.data(), 1.0f, RopeStyle::Neox);
      be.add_rmsnorm(x.data(), h.data(), w.data(), h.data(), k, 2048, 1e-5f);
      be.gated_activation(g.data(), u.data(), 8192 * k, Activation::SiLU);
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      for (auto& v : x) v *= 0.5f;
    }
    std::printf("k=%d: %.1f us per layer, x16 layers = %.2f ms per step\n", k, best * 1e6, best * 16e3);
  }
}
