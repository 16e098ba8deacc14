// One-off micro benchmark of the CPU matmul: GB/s of weight bytes read by matmul() for a 2048 x 8192
// (n_out x n_in, or --shape) matrix, against the machine's read / memcpy bandwidth, for decode-sized
// calls (1, 2, 4, 8 tokens) and a prefill-sized one (64 tokens, hot only: compute-bound), per type,
// ISA and layout ("packed": the x16 copy of pack_matrix, AVX-512 and AVX2).
// "cold" cycles through copies of the matrix totalling >= 512 MiB (far past L3: DRAM-bound),
// "hot" repeats one matrix (L3-resident when it fits in it). Every figure is the best single call
// (the machine is shared: the least disturbed call), so compare runs made back to back.
// Not part of the CMake build; after building polykv_lib (one command line):
//   g++ -std=c++20 -O2 -mavx2 -Isrc bench/matmul_bench.cpp build/libpolykv_lib.a
//       $(pkg-config --libs libpcre2-8) -lpthread -o build/matmul_bench
//   build/matmul_bench [threads] [--no-bandwidth] [--cpu-clock] [--shape 2048x8192]
//                      [--types q4_0,q8_0,q5_0,q4_K,q5_K,q6_K,mxfp4,f16,f32] [isa...]
//   (isa: avx512 avx2 scalar; default: the SIMD ones this CPU has)
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/matmul.h"
#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/packed_weights.h"
#include "quant/quant.h"

using namespace polykv;
using Clock = std::chrono::steady_clock;

static double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Timer of the matmul calls: wall clock, or with --cpu-clock the calling thread's CPU time (with 1
// thread the caller does all the work, so on a shared machine this leaves out the time the OS ran
// other processes; meaningless with more threads).
static bool g_cpu_clock = false;
static double now_s() {
  if (!g_cpu_clock) return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// Streams `bytes` from `p` with AVX2 loads on n_threads threads; returns GB/s.
static double read_bandwidth(const uint8_t* p, size_t bytes, int n_threads, int reps) {
  std::vector<long long> sink(static_cast<size_t>(n_threads));
  auto t0 = Clock::now();
  std::vector<std::thread> ts;
  for (int t = 0; t < n_threads; ++t)
    ts.emplace_back([&, t] {
      const size_t chunk = bytes / size_t(n_threads) / 128 * 128;
      const uint8_t* b = p + size_t(t) * chunk;
      __m256i acc0 = _mm256_setzero_si256(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
      for (int r = 0; r < reps; ++r)
        for (size_t i = 0; i < chunk; i += 128) {
          acc0 = _mm256_xor_si256(acc0, _mm256_load_si256((const __m256i*)(b + i)));
          acc1 = _mm256_xor_si256(acc1, _mm256_load_si256((const __m256i*)(b + i + 32)));
          acc2 = _mm256_xor_si256(acc2, _mm256_load_si256((const __m256i*)(b + i + 64)));
          acc3 = _mm256_xor_si256(acc3, _mm256_load_si256((const __m256i*)(b + i + 96)));
        }
      const __m256i x = _mm256_xor_si256(_mm256_xor_si256(acc0, acc1), _mm256_xor_si256(acc2, acc3));
      sink[size_t(t)] = _mm256_extract_epi64(x, 0);
    });
  for (auto& t : ts) t.join();
  const double s = seconds_since(t0);
  if (sink[0] == 42) std::printf(" ");
  return double(bytes) * reps / s / 1e9;
}

static double memcpy_bandwidth(uint8_t* dst, const uint8_t* src, size_t bytes, int n_threads, int reps) {
  auto t0 = Clock::now();
  std::vector<std::thread> ts;
  for (int t = 0; t < n_threads; ++t)
    ts.emplace_back([&, t] {
      const size_t chunk = bytes / size_t(n_threads);
      for (int r = 0; r < reps; ++r) std::memcpy(dst + size_t(t) * chunk, src + size_t(t) * chunk, chunk);
    });
  for (auto& t : ts) t.join();
  return 2.0 * double(bytes) * reps / seconds_since(t0) / 1e9;  // read + write
}

int main(int argc, char** argv) {
  int n_threads = 2;
  long long n_out = 2048, n_in = 8192;  // --shape OUTxIN
  std::string types = "q4_0,q8_0,q5_0,f16,f32";  // --types a,b,...
  bool bandwidth = true;
  std::vector<cpu::Isa> isas;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--no-bandwidth") bandwidth = false;
    else if (a == "--cpu-clock") g_cpu_clock = true;
    else if (a == "avx512") isas.push_back(cpu::Isa::Avx512);
    else if (a == "avx2") isas.push_back(cpu::Isa::Avx2);
    else if (a == "scalar") isas.push_back(cpu::Isa::Scalar);
    else if (a == "--shape" && i + 1 < argc) std::sscanf(argv[++i], "%lldx%lld", &n_out, &n_in);
    else if (a == "--types" && i + 1 < argc) types = argv[++i];
    else n_threads = std::atoi(argv[i]);
  }
  if (isas.empty()) isas = {cpu::Isa::Avx512, cpu::Isa::Avx2};
  const size_t big = size_t(512) << 20;
  uint8_t* a = static_cast<uint8_t*>(std::aligned_alloc(64, big));
  std::memset(a, 1, big);
  std::printf("threads %d, %s\n", n_threads, g_cpu_clock ? "thread CPU time" : "wall clock");
  if (bandwidth) {
    uint8_t* b = static_cast<uint8_t*>(std::aligned_alloc(64, big));
    std::memset(b, 2, big);
    for (int nt = 1; nt <= n_threads; ++nt) {
      double rd = 0, cp = 0;  // best of 3
      for (int r = 0; r < 3; ++r) {
        rd = std::max(rd, read_bandwidth(a, big, nt, 1));
        cp = std::max(cp, memcpy_bandwidth(b, a, big, nt, 1));
      }
      std::printf("DRAM read   %d thr: %6.1f GB/s   memcpy (r+w) %d thr: %6.1f GB/s\n", nt, rd, nt, cp);
    }
    std::free(b);
  }

  ThreadPool pool(n_threads);
  const int64_t max_tok = 64;
  std::vector<float> x(size_t(n_in * max_tok)), y(size_t(n_out * max_tok));
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  for (auto& v : x) v = nd(rng);
  for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q5_0, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::MXFP4, DType::F16, DType::F32}) {
    if (("," + types + ",").find("," + std::string(dtype_name(t)) + ",") == std::string::npos) continue;
    // One matrix quantized from random floats, replicated to fill `big` bytes.
    const size_t rb = row_bytes(t, n_in), mat = rb * size_t(n_out);
    std::vector<float> row(static_cast<size_t>(n_in));
    for (int64_t o = 0; o < n_out; ++o) {
      for (auto& v : row) v = nd(rng);
      quantize_row_ref(t, row.data(), a + size_t(o) * rb, n_in);
    }
    const size_t copies = big / mat;
    for (size_t c = 1; c < copies; ++c) std::memcpy(a + c * mat, a, mat);
    for (bool packed : {false, true}) {
      if (packed && !cpu::packable(t)) continue;
      // The packed copies replace the originals (n_out is a multiple of 16: no tail rows).
      std::vector<WeightMatrix> ws(copies);
      for (size_t c = 0; c < copies; ++c) {
        ws[c] = WeightMatrix{t, a + c * mat, n_in, n_out, rb, nullptr};
        if (packed) ws[c].packed = cpu::pack_matrix(t, ws[c].data, n_in, n_out, rb);
      }
      for (cpu::Isa isa : isas) {
        if (!isa_supported(isa) || (packed && isa == cpu::Isa::Scalar)) continue;
        cpu::set_isa_override(isa);
        for (int64_t n_tok : {1, 2, 4, 8, 64}) {
          matmul(ws[0], x.data(), y.data(), n_tok, pool);  // warm up
          const bool scalar = isa == cpu::Isa::Scalar;
          // cold: every call reads a different copy (decode sizes only; 64 tokens are compute-bound)
          double best = 1e30;
          if (n_tok <= 8)
            for (int r = 0; r < (scalar ? 1 : 4); ++r)
              for (size_t c = 0; c < copies; ++c) {
                const double t0 = now_s();
                matmul(ws[c], x.data(), y.data(), n_tok, pool);
                best = std::min(best, now_s() - t0);
              }
          // hot: the same copy again and again
          const int hot_reps = scalar ? 3 : n_tok > 8 ? 10 : 40;
          double best_hot = 1e30;
          for (int r = 0; r < hot_reps; ++r) {
            const double t0 = now_s();
            matmul(ws[0], x.data(), y.data(), n_tok, pool);
            best_hot = std::min(best_hot, now_s() - t0);
          }
          char cold[64] = "    -";
          if (best < 1e30)
            std::snprintf(cold, sizeof cold, "%6.1f GB/s (%6.2f ms)", double(mat) / best / 1e9, best * 1e3);
          std::printf("%-5s %-6s %-7s %5.1f MB  tokens %2lld: cold %-22s hot %6.1f GB/s (%6.2f ms)\n",
                      dtype_name(t), packed ? "packed" : "rows", cpu::isa_name(isa), double(mat) / 1e6,
                      (long long)n_tok, cold, double(mat) / best_hot / 1e9, best_hot * 1e3);
          std::fflush(stdout);
        }
      }
      cpu::clear_isa_override();
    }
  }
  std::free(a);
}
