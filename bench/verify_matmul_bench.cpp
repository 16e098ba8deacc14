// The weight matmuls of one llama-3.2-1b decode step (16 layers: q, k, v, o, gate, up, down, and the
// 128256 x 2048 vocabulary matrix), packed, with k = 1, 2, 4, 8 columns (tokens), DRAM-bound: the
// ~0.7 GB (q4_0) of weights are read once per step as in the model. Isolates the matmul part of a
// verify step (issue #10, docs/VERIFY_KERNELS.md) from attention and the per-row ops.
// Steps are interleaved over k (k = 1, 2, 4, 8, 1, 2, ...) and each ratio is taken within a round;
// prints the median (min..max) wall ratio and process-CPU-time ratio to k = 1.
// Not part of the CMake build; after building polykv_lib (one command line):
//   g++ -std=c++20 -O2 -Isrc bench/verify_matmul_bench.cpp build/libpolykv_lib.a
//       $(pkg-config --libs libpcre2-8) -lpthread -o build/verify_matmul_bench
//   build/verify_matmul_bench [--type q4_0|q8_0|q4_K|q5_K|q6_K] [--threads 2] [--rounds 5] [--steps 4]
//   [--layers 16] [--vocab 1] (--layers 1 --vocab 0: 34 MB (q4_0), mostly cache-resident)
//   [--one N_OUT N_IN] (one matrix only: e.g. --one 256 4096 --threads 1 stays in L2: the kernel's compute alone)
//   (--only-k K: just rounds x steps steps of K columns after the warm-up, e.g. under perf stat)
//   "best": the fastest round's ms per step of each k and its ratio to k = 1's fastest (a noisy
//   host slows whole rounds; e.g. --rounds 30 --steps 1). POLYKV_PACKED_PF=0 turns the packed
//   kernels' weight prefetch off (docs/VERIFY_KERNELS.md "2026-12-02").
#include <algorithm>
#include <iterator>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/matmul.h"
#include "backend/cpu/packed_weights.h"
#include "core/thread_pool.h"
#include "quant/quant.h"

using namespace polykv;

static double cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}
static double wall_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

int main(int argc, char** argv) {
  std::string type_name = "q4_0";
  int threads = 2, rounds = 5, steps = 4, layers = 16, only_k = 0;
  int64_t one_out = 0, one_in = 0;  // --one N_OUT N_IN: that one matrix instead (e.g. L2-resident: the kernel alone)
  bool vocab = true;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--type") type_name = argv[i + 1];
    else if (a == "--threads") threads = std::atoi(argv[i + 1]);
    else if (a == "--rounds") rounds = std::atoi(argv[i + 1]);
    else if (a == "--steps") steps = std::atoi(argv[i + 1]);
    else if (a == "--layers") layers = std::atoi(argv[i + 1]);
    else if (a == "--vocab") vocab = std::atoi(argv[i + 1]) != 0;
    else if (a == "--only-k") only_k = std::atoi(argv[i + 1]);
    else if (a == "--one" && i + 2 < argc) {
      one_out = std::atoll(argv[i + 1]);
      one_in = std::atoll(argv[++i + 1]);
    }
  }
  const std::pair<const char*, DType> kTypes[] = {
      {"q4_0", DType::Q4_0}, {"q8_0", DType::Q8_0}, {"q4_K", DType::Q4_K}, {"q5_K", DType::Q5_K}, {"q6_K", DType::Q6_K}};
  const auto known = std::find_if(std::begin(kTypes), std::end(kTypes), [&](const auto& e) { return type_name == e.first; });
  if (known == std::end(kTypes)) {
    std::fprintf(stderr, "--type %s: one of q4_0, q8_0, q4_K, q5_K, q6_K\n", type_name.c_str());
    return 2;
  }
  const DType t = known->second;
  // {n_out, n_in} of one layer, then the vocabulary matrix once.
  const std::vector<std::pair<int64_t, int64_t>> layer = {{2048, 2048}, {512, 2048}, {512, 2048}, {2048, 2048},
                                                          {8192, 2048}, {8192, 2048}, {2048, 8192}};
  std::vector<std::pair<int64_t, int64_t>> shapes;
  for (int l = 0; l < layers; ++l) shapes.insert(shapes.end(), layer.begin(), layer.end());
  if (vocab) shapes.push_back({128256, 2048});
  if (one_out > 0) {
    // The buffers below hold 8 tokens of up to 8192 inputs and 128256 outputs; n_in a whole number of q4_K blocks.
    if (one_out % 16 != 0 || one_out > 128256 || one_in <= 0 || one_in % 256 != 0 || one_in > 8192) {
      std::fprintf(stderr, "--one N_OUT N_IN: N_OUT a multiple of 16 up to 128256, N_IN a multiple of 256 up to 8192\n");
      return 2;
    }
    shapes = {{one_out, one_in}};
  }

  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  std::vector<WeightMatrix> ws;
  std::vector<std::vector<uint8_t>> raw;  // originals (only for packing; the kernels read `packed`)
  size_t bytes = 0;
  for (auto [n_out, n_in] : shapes) {
    const size_t rb = row_bytes(t, n_in);
    raw.emplace_back(rb * size_t(n_out));
    std::vector<float> row(static_cast<size_t>(n_in));
    // 64 distinct random rows repeated (quantizing 1.2 G values would take minutes).
    for (int64_t o = 0; o < n_out; ++o) {
      if (o < 64) {
        for (auto& v : row) v = nd(rng);
        quantize_row_ref(t, row.data(), raw.back().data() + size_t(o) * rb, n_in);
      } else {
        std::memcpy(raw.back().data() + size_t(o) * rb, raw.back().data() + size_t(o % 64) * rb, rb);
      }
    }
    WeightMatrix w{t, raw.back().data(), n_in, n_out, rb, nullptr};
    pack_for_matmul(w);
    if (w.packed) {
      std::vector<uint8_t>().swap(raw.back());  // free the original: only the packed copy is read
      static uint8_t never_read[64];
      w.data = never_read;  // matmul reads only `packed` (n_out % 16 == 0)
    }  // else (a type without a packed kernel under this ISA): the row kernels read the original rows
    bytes += rb * size_t(n_out);
    ws.push_back(w);
  }
  ThreadPool pool(threads);
  const int ks[] = {1, 2, 4, 8};
  std::vector<float> x(size_t(8) * 8192), y(size_t(8) * 128256);
  for (auto& v : x) v = nd(rng);
  auto step = [&](int k) {
    for (const WeightMatrix& w : ws) matmul(w, x.data(), y.data(), k, pool);
  };
  for (int k : ks) step(k);  // warm-up
  if (only_k > 0) {  // for perf stat: rounds x steps steps of k columns only, no report
    for (int s = 0; s < rounds * steps; ++s) step(only_k);
    return 0;
  }
  // [k][round] ms per step, k interleaved inside a round.
  std::vector<std::vector<double>> wall(4), cpu(4);
  for (int r = 0; r < rounds; ++r)
    for (int i = 0; i < 4; ++i) {
      const double w0 = wall_s(), c0 = cpu_s();
      for (int s = 0; s < steps; ++s) step(ks[i]);
      wall[size_t(i)].push_back((wall_s() - w0) / steps * 1e3);
      cpu[size_t(i)].push_back((cpu_s() - c0) / steps * 1e3);
    }
  std::printf("%s, %.0f MB of %s weights per step, %d threads, %d rounds x %d steps\n", type_name.c_str(),
              double(bytes) / 1e6, ws.front().packed ? "packed" : "row (unpacked)", threads, rounds, steps);
  for (int i = 0; i < 4; ++i) {
    std::vector<double> rw, rc;  // ratios to k = 1 within each round
    for (int r = 0; r < rounds; ++r) {
      rw.push_back(wall[size_t(i)][size_t(r)] / wall[0][size_t(r)]);
      rc.push_back(cpu[size_t(i)][size_t(r)] / cpu[0][size_t(r)]);
    }
    // The fastest round of each k (least disturbed by a noisy host) and the ratio of those minima.
    const double wmin = *std::min_element(wall[size_t(i)].begin(), wall[size_t(i)].end());
    const double wmin1 = *std::min_element(wall[0].begin(), wall[0].end());
    std::printf("k=%d wall %8.3f ms ratio %.3f (%.3f..%.3f) | process cpu %8.3f ms ratio %.3f (%.3f..%.3f) | "
                "best %8.4f ms ratio %.3f\n", ks[i],
                median(wall[size_t(i)]), median(rw), *std::min_element(rw.begin(), rw.end()),
                *std::max_element(rw.begin(), rw.end()), median(cpu[size_t(i)]), median(rc),
                *std::min_element(rc.begin(), rc.end()), *std::max_element(rc.begin(), rc.end()), wmin, wmin / wmin1);
  }
}
