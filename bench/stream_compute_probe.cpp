// Streaming probe (docs/VERIFY_KERNELS.md, 2026-12-01e): GB/s (thread CPU time, best of 3) of reading a 768 MB
// buffer with T threads while doing W vpdpbusd per 256 bytes that do not feed the loads, optionally with a
// software prefetch PF bytes ahead: does compute hide behind a DRAM stream on this CPU?
//   g++ -O2 -march=sapphirerapids bench/stream_compute_probe.cpp -o build/stream_compute_probe -lpthread
//   build/stream_compute_probe [T] [PF]
#include <immintrin.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
#include <algorithm>
#include <ctime>
static double tcpu(){timespec ts{};clock_gettime(CLOCK_THREAD_CPUTIME_ID,&ts);return ts.tv_sec+1e-9*ts.tv_nsec;}
static size_t g_pf = 0;
template <int W>
static long long stream(const uint8_t* p, size_t bytes) {
  __m512i acc[8]; for (auto& a : acc) a = _mm512_setzero_si512();
  const __m512i x = _mm512_set1_epi32(0x01020304);
  for (size_t i = 0; i < bytes; i += 256) {
    if (g_pf) for (int l = 0; l < 4; ++l) _mm_prefetch((const char*)p + i + g_pf + 64 * l, _MM_HINT_T0);
    __m512i v0 = _mm512_load_si512(p + i), v1 = _mm512_load_si512(p + i + 64), v2 = _mm512_load_si512(p + i + 128), v3 = _mm512_load_si512(p + i + 192);
    acc[0] = _mm512_xor_si512(acc[0], v0); acc[1] = _mm512_xor_si512(acc[1], v1); acc[2] = _mm512_xor_si512(acc[2], v2); acc[3] = _mm512_xor_si512(acc[3], v3);
#pragma GCC unroll 64
    for (int w = 0; w < W; ++w) acc[4 + (w & 3)] = _mm512_dpbusd_epi32(acc[4 + (w & 3)], w & 1 ? v0 : v1, x);
  }
  __m512i s = acc[0]; for (int i = 1; i < 8; ++i) s = _mm512_xor_si512(s, acc[i]);
  return _mm512_reduce_add_epi32(s);
}
template <int W> double run(const uint8_t* buf, size_t bytes, int T) {
  double best = 1e9;
  for (int r = 0; r < 3; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> ts; std::vector<long long> sink(T); std::vector<double> cpu(T);
    for (int t = 0; t < T; ++t) ts.emplace_back([&, t] { double c0 = tcpu(); sink[t] = stream<W>(buf + t * (bytes / T), bytes / T); cpu[t] = tcpu() - c0; });
    for (auto& t : ts) t.join();
    best = std::min(best, *std::max_element(cpu.begin(), cpu.end()));
    if (sink[0] == 42) std::printf(" ");
  }
  return bytes / best / 1e9;
}
int main(int argc, char** argv) {
  const int T = argc > 1 ? std::atoi(argv[1]) : 2;
  g_pf = argc > 2 ? std::atoi(argv[2]) : 0;
  std::printf("prefetch %zu: ", g_pf);
  const size_t bytes = size_t(768) << 20;
  uint8_t* buf = static_cast<uint8_t*>(std::aligned_alloc(64, bytes));
  std::memset(buf, 3, bytes);
  std::printf("threads %d GB/s with W dpbusd per 256 B: W=0 %.1f  W=8 %.1f  W=16 %.1f  W=24 %.1f  W=32 %.1f  W=64 %.1f\n", T,
              run<0>(buf, bytes, T), run<8>(buf, bytes, T), run<16>(buf, bytes, T), run<24>(buf, bytes, T), run<32>(buf, bytes, T), run<64>(buf, bytes, T));
}
